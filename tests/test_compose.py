"""docker-compose.yml and the Dockerfile, checked without Docker: every command must mean something to this project."""

from __future__ import annotations

import importlib
import re
import shlex
import warnings
from pathlib import Path
from urllib.parse import urlsplit

import click
import pytest
import yaml
from celery.app.utils import find_app
from celery.bin.base import CLIContext
from celery.bin.celery import celery as celery_cli
from django.apps import apps
from django.conf import settings

import celeryconfig

ROOT = Path(__file__).resolve().parent.parent
APP_SERVICES = ("migrate", "web", "worker", "ops", "hooks", "beat", "flower")
LONG_RUNNING = ("redis", "postgres", "pgbouncer", "web", "worker", "ops", "hooks", "beat", "flower")
DECLARED_QUEUES = {queue.name for queue in celeryconfig.task_queues}


def interpolate(value: str) -> str:
    """What Compose does to `${NAME:-default}`, `${NAME:?error}` and `$$`, with placeholders for required values."""
    value = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: m.group(2), value)
    value = re.sub(r"\$\{(\w+)(:?\?[^}]*)?\}", lambda m: f"<{m.group(1)}>", value)
    return value.replace("$$", "$")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def command(service: dict) -> list[str]:
    raw = service["command"]
    return [interpolate(str(part)) for part in (shlex.split(raw) if isinstance(raw, str) else raw)]


def celery_parse(args: list[str]) -> tuple[str, dict]:
    """Parse a `celery ...` command line with Celery's own CLI, without running it. Unknown options fail.
    `python -m project.worker OPTIONS` is parsed as what it runs: `celery -A project worker OPTIONS`."""
    if args[:3] == ["python", "-m", "project.worker"]:
        args = ["celery", "-A", "project", "worker", *args[3:]]
    assert args[0] == "celery", args
    ctx = celery_cli.make_context("celery", list(args[1:]))
    ctx.obj = CLIContext(app=find_app(ctx.params["app"]), no_color=True, workdir=None, quiet=True)
    with warnings.catch_warnings():  # Click 8.2 deprecates protected_args; Click 9 folds it into args
        warnings.simplefilter("ignore", DeprecationWarning)
        leftover = [*ctx.protected_args, *ctx.args]
    name, subcommand, rest = celery_cli.resolve_command(ctx, leftover)
    return name, {"app": ctx.params["app"], **subcommand.make_context(name, rest, parent=ctx).params}


def requirement_names() -> set[str]:
    names = set()
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(re.split(r"[\[=<>~! ]", line, maxsplit=1)[0].lower())
    return names


def test_every_service_is_there(services):
    assert set(LONG_RUNNING) | {"migrate"} <= set(services)


def test_every_service_has_a_restart_policy(services):
    for name, service in services.items():
        assert service.get("restart") in {"always", "unless-stopped", "on-failure"}, name


def test_long_running_services_have_healthchecks(services):
    for name in LONG_RUNNING:
        assert services[name].get("healthcheck", {}).get("test"), name


def test_app_services_wait_for_healthy_redis_and_postgres(services):
    """Through PgBouncer, which waits for PostgreSQL; the migrations go to PostgreSQL itself."""
    assert services["pgbouncer"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in APP_SERVICES:
        depends = services[name]["depends_on"]
        assert depends["redis"]["condition"] == "service_healthy", name
        database = "postgres" if name == "migrate" else "pgbouncer"
        assert depends[database]["condition"] == "service_healthy", name


def test_processes_start_only_after_migrations(services):
    assert command(services["migrate"])[:3] == ["python", "manage.py", "migrate"]
    assert "migrate" not in services["migrate"]["depends_on"]
    for name in ("web", "worker", "ops", "beat", "flower"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name


def test_app_services_get_the_environment_trawl_reads(services):
    env_source = (ROOT / "project" / "env.py").read_text()
    for name in APP_SERVICES:
        env = {key: interpolate(str(value)) for key, value in services[name]["environment"].items()}
        for key in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS"):
            assert key in env, (name, key)
            assert f'"{key}"' in env_source, f"project/env.py does not read {key}"
        assert env["DEBUG"] == "0"
        redis_url, database_url = urlsplit(env["REDIS_URL"]), urlsplit(env["DATABASE_URL"])
        assert (redis_url.scheme, redis_url.hostname, redis_url.password) == ("redis", "redis", "<REDIS_PASSWORD>")
        assert database_url.password == "<POSTGRES_PASSWORD>"
        if name == "migrate":  # session locks: straight to PostgreSQL
            assert (database_url.hostname, database_url.port) == ("postgres", 5432), name
            assert not env["TRAWL_DATABASE_POOLING"]
        else:
            assert (database_url.hostname, database_url.port) == ("pgbouncer", 6432), name
            assert env["TRAWL_DATABASE_POOLING"] == "transaction"
        assert "127.0.0.1" in env["ALLOWED_HOSTS"].split(","), "the healthcheck calls /healthz on 127.0.0.1"


def test_database_url_means_postgresql_to_django(services):
    import dj_database_url

    config = dj_database_url.parse(interpolate(services["web"]["environment"]["DATABASE_URL"]))
    bouncer = services["pgbouncer"]["environment"]

    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["HOST"], config["PORT"], config["NAME"]) == ("pgbouncer", 6432, "trawl")
    postgres_user = interpolate(services["postgres"]["environment"]["POSTGRES_USER"])
    assert config["USER"] == bouncer["DATABASE_USER"] == postgres_user
    assert interpolate(bouncer["DATABASE_PASSWORD"]) == interpolate(
        services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    )
    assert services["pgbouncer"]["build"] == "docker/pgbouncer" and (ROOT / "docker/pgbouncer/entrypoint.sh").exists()


def test_app_services_build_the_dockerfile(services):
    assert (ROOT / "Dockerfile").is_file()
    for name in APP_SERVICES:
        assert services[name]["build"] in (".", {"context": "."}), name


def test_web_serves_the_wsgi_app_with_gunicorn_on_port_8000(services):
    from gunicorn.config import Config

    args = command(services["web"])
    assert args[0] == "gunicorn"
    parsed = Config().parser().parse_args(args[1:])

    module, _, attribute = parsed.args[0].partition(":")
    assert callable(getattr(importlib.import_module(module), attribute or "application"))
    assert parsed.bind == ["0.0.0.0:8000"]
    assert any(str(port).endswith(":8000") for port in services["web"]["ports"])


def test_crawl_worker_consumes_the_crawl_queue(services):
    name, params = celery_parse(command(services["worker"]))

    assert (name, params["app"]) == ("worker", "project")
    assert set(params["queues"]) == {celeryconfig.CRAWL_QUEUE}


def test_ops_worker_consumes_control_only(services):
    name, params = celery_parse(command(services["ops"]))

    assert name == "worker"
    assert set(params["queues"]) == {celeryconfig.CONTROL_QUEUE}


def test_webhook_deliveries_have_a_worker_of_their_own(services):
    # A slow receiver holds a hooks process, never one the reaper, dispatch or the sweeps run on.
    name, params = celery_parse(command(services["hooks"]))

    assert name == "worker"
    assert set(params["queues"]) == {celeryconfig.CALLBACK_QUEUE}
    assert celeryconfig.task_routes["callbacks.tasks.deliver"]["queue"] == celeryconfig.CALLBACK_QUEUE


def test_every_declared_queue_has_a_consumer_and_every_consumed_queue_is_declared(services):
    consumed = set()
    for name in ("worker", "ops", "hooks"):
        consumed |= set(celery_parse(command(services[name]))[1]["queues"])
    routed = {route["queue"] for route in celeryconfig.task_routes.values()} | {celeryconfig.task_default_queue}

    assert consumed == DECLARED_QUEUES
    assert routed <= consumed


def test_periodic_tasks_go_to_a_consumed_queue(services):
    ops_queues = set(celery_parse(command(services["ops"]))[1]["queues"])

    assert "control" in ops_queues  # project/periodic.py sends beat's tasks to `control`


def test_celery_app_module_is_the_projects_celery_app():
    app = find_app("project")

    assert app.main == "trawl"
    assert app.conf.broker_transport_options == celeryconfig.broker_transport_options


def test_crawl_worker_scales(services):
    worker = services["worker"]

    assert "container_name" not in worker
    assert "ports" not in worker
    assert "%h" in " ".join(command(worker)), "node names must differ per replica"


def test_worker_healthchecks_read_their_own_node_without_a_broadcast(services):
    for name, node in (("worker", "crawl@"), ("ops", "ops@"), ("hooks", "hooks@")):
        check = shlex.split(interpolate(services[name]["healthcheck"]["test"][1]).replace("$HOSTNAME", "host"))

        assert check == ["python", "-m", "project.presence", f"{node}host"]
        assert f"{node}%h" in command(services[name])
        assert {"--without-gossip", "--without-mingle"} <= set(command(services[name]))


def test_beat_uses_the_database_scheduler_from_celeryconfig(services):
    name, params = celery_parse(command(services["beat"]))

    assert name == "beat"
    assert params["scheduler"] == celeryconfig.beat_scheduler == settings.CELERY_BEAT_SCHEDULER
    assert apps.is_installed("django_celery_beat")


def test_flower_has_basic_auth_from_the_environment(services):
    from flower.options import options

    args = command(services["flower"])
    name, params = celery_parse(args)
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in params["tornado_argv"])

    assert name == "flower"
    assert {flag.replace("-", "_") for flag in flags} <= set(options.as_dict())
    assert "basic-auth" not in flags, "the admin's password would be on the command line"
    assert services["flower"]["environment"]["FLOWER_BASIC_AUTH"].startswith("${FLOWER_BASIC_AUTH:?")


def test_flower_port_is_not_public(services):
    assert all(str(port).startswith("127.0.0.1:") for port in services["flower"]["ports"])


def test_every_command_is_in_requirements(services):
    needed = {"gunicorn", "celery", "flower", "django", "psycopg"}

    assert needed <= requirement_names()


def test_unknown_celery_option_would_fail_these_checks():
    with pytest.raises(click.UsageError):
        celery_parse(["celery", "-A", "project", "worker", "--no-such-option"])


def test_dockerfile_is_slim_python_311_installs_requirements_and_drops_root():
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines() if line.strip()]
    instructions = [line for line in lines if not line.startswith("#")]

    assert instructions[0] == "FROM python:3.11-slim"
    assert any("pip install -r requirements.txt" in line for line in instructions)
    users = [line.split()[1] for line in instructions if line.startswith("USER ")]
    assert users and users[-1] not in {"root", "0"}


def test_dockerfile_copies_what_exists_and_every_local_app():
    copies = [line.split()[1:-1] for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")]
    sources = {source.rstrip("/") for sources in copies for source in sources}

    for source in sources:
        assert (ROOT / source).exists(), source
    local_apps = {config.name for config in apps.get_app_configs() if Path(config.path).parent == ROOT}
    assert local_apps <= sources, local_apps - sources
    # Every top-level package the processes import, Django app or not (runtime/ is a plain package): not the tests.
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages <= sources, packages - sources
    assert {"project", "manage.py", "celeryconfig.py", "requirements.txt"} <= sources
    assert ".venv" not in sources and "." not in sources


def test_every_app_service_runs_the_production_settings(services, compose):
    """Guard on, HSTS, secure cookies: docker-compose is how people deploy; never the development settings."""
    env = compose["x-trawl"]["environment"]
    assert env["DJANGO_SETTINGS_MODULE"] == "project.settings_production"
    for name in APP_SERVICES:
        assert services[name]["environment"]["DJANGO_SETTINGS_MODULE"] == "project.settings_production", name


def test_the_web_port_is_published_on_the_loopback_only(services):
    for port in services["web"]["ports"]:
        assert interpolate(str(port)).startswith("127.0.0.1:"), port


def test_rabbitmq_runs_only_in_its_profile_and_app_services_may_wait_for_it(services):
    rabbit = services["rabbitmq"]
    assert rabbit["profiles"] == ["rabbitmq"]
    assert rabbit["healthcheck"]["test"] and rabbit["image"].startswith("rabbitmq:")
    assert "consumer_timeout" in rabbit["environment"]["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"]
    assert all("profiles" not in services[name] for name in (*LONG_RUNNING, "migrate")), "the default stays Redis"
    for name in APP_SERVICES:
        if name == "migrate":
            continue
        wait = services[name]["depends_on"]["rabbitmq"]
        assert (wait["condition"], wait["required"]) == ("service_healthy", False), name


def test_the_broker_is_redis_unless_celery_broker_url_is_set(services):
    from project.messaging.brokers import broker_transport

    rabbit = services["rabbitmq"]["environment"]
    for name in APP_SERVICES:
        env = {key: interpolate(str(value)) for key, value in services[name]["environment"].items()}
        assert env["CELERY_BROKER_URL"] == "", name  # empty: project.env falls back to REDIS_URL
    # The URL the compose file's header gives, for the profile's user and vhost, is the AMQP transport.
    header = (ROOT / "docker-compose.yml").read_text().split("services:", 1)[0]
    url = re.search(r"CELERY_BROKER_URL=(\S+)", header).group(1)
    assert url == f"amqp://{rabbit['RABBITMQ_DEFAULT_USER']}:trawl@rabbitmq:5672/{rabbit['RABBITMQ_DEFAULT_VHOST']}"
    assert broker_transport(url) == "amqp"


def test_redis_and_postgres_never_start_without_a_password(services, compose):
    """A password-less Redis or database is one a packaged version's child (uploaded code, on the workers' network)
    logs in to past everything Trawl scrubbed: each password is required (`${VAR:?...}`, no default), given to the
    server, and in the URL every app service connects with."""
    text = (ROOT / "docker-compose.yml").read_text()
    for name in ("REDIS_PASSWORD", "POSTGRES_PASSWORD"):
        assert f"${{{name}:?" in text and f"${{{name}:-" not in text and f"${{{name}}}" not in text, name
    redis_env = {key: interpolate(str(value)) for key, value in services["redis"]["environment"].items()}
    assert redis_env == {"REDIS_PASSWORD": "<REDIS_PASSWORD>"}
    server = shlex.split(command(services["redis"])[-1])
    assert server[:2] == ["exec", "redis-server"] and server[server.index("--requirepass") + 1] == "$REDIS_PASSWORD"
    assert "REDISCLI_AUTH" in interpolate(services["redis"]["healthcheck"]["test"][1]), "the healthcheck logs in"
    postgres = {key: interpolate(str(value)) for key, value in services["postgres"]["environment"].items()}
    assert postgres["POSTGRES_PASSWORD"] == "<POSTGRES_PASSWORD>"
    assert "POSTGRES_HOST_AUTH_METHOD" not in postgres, "trust would accept anyone"
    for name in APP_SERVICES:
        env = {key: interpolate(str(value)) for key, value in services[name]["environment"].items()}
        assert urlsplit(env["REDIS_URL"]).password == redis_env["REDIS_PASSWORD"], name
        assert urlsplit(env["DATABASE_URL"]).password == postgres["POSTGRES_PASSWORD"], name
        assert env.get("TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED", "0") in ("", "0"), name
