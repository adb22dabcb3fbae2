"""Production settings: the project's settings, locked down. `manage.py check --deploy` is clean with them.

Run with DJANGO_SETTINGS_MODULE=project.settings_production. Refuses to start without SECRET_KEY; DEBUG stays off
unless the environment says otherwise; HTTPS is enforced (SSL redirect, HSTS, secure cookies); and Trawl refuses to
call back or (for non-admin requesters) crawl private, loopback and link-local hosts.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from project import env

if not env.SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set in the environment for production settings")

from project.settings import *  # noqa: F403

SECRET_KEY = env.SECRET_KEY
DEBUG = env.DEBUG

# HTTPS only. TRAWL_SECURE_SSL_REDIRECT=0 when the proxy in front already redirects (check --deploy then warns).
SECURE_SSL_REDIRECT = env.SECURE_SSL_REDIRECT
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # the container's own healthcheck speaks plain HTTP on the loopback
SECURE_HSTS_SECONDS = env.HSTS_SECONDS
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if env.TRUST_X_FORWARDED_PROTO:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SECURE = True
CSRF_TRUSTED_ORIGINS = env.CSRF_TRUSTED_ORIGINS
X_FRAME_OPTIONS = "DENY"

# Outgoing requests: no callbacks to, and no non-admin crawls of, internal addresses.
TRAWL_BLOCK_PRIVATE_TARGETS = env.BLOCK_PRIVATE_TARGETS_PRODUCTION

# Packaged crawls' children never start while a Redis user needs no password: each would log in as that user, past
# its own (runtime.packaged.child_redis). TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED=1 overrides it, knowingly.
TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED = env.PACKAGE_REDIS_NOPASS_ALLOWED_PRODUCTION

# Reloading edited spider modules in a running worker is for development: production deploys code and restarts, or
# ships it as packages.
TRAWL_SPIDER_RELOAD = False
