"""Who may call the API: requesters and their tokens."""

from __future__ import annotations

from django.db import models


class Requester(models.Model):
    """A team or system that submits crawls. Its webhook secret signs the callbacks it receives."""

    name = models.SlugField(max_length=100, unique=True)
    is_admin = models.BooleanField(default=False, help_text="Admins also manage scrapers, sources and throttles.")
    webhook_secret = models.CharField(max_length=64)
    max_active_jobs = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text=(
            "Most jobs it may have queued + running at once, a job with parallelism N counting N. Empty: the "
            "installation default (TRAWL_DEFAULT_MAX_ACTIVE_JOBS; admins: no limit)."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    # DRF treats the authenticated principal as a user; a requester always is one.
    is_authenticated = True
    is_anonymous = False


class ApiToken(models.Model):
    """Only a SHA-256 of the token is stored: a leaked database does not leak working tokens."""

    requester = models.ForeignKey(Requester, on_delete=models.CASCADE, related_name="tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8, help_text="First characters of the token, to tell tokens apart.")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.requester} {self.prefix}…"
