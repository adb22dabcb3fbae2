"""Per machine: one virtualenv per package hash, built once and shared by every worker process of the machine.

`<TRAWL_PACKAGE_CACHE_DIR>/<sha256>/` is a `python -m venv` whose site-packages holds the wheel and the dependencies
pip installed for it, followed (through a .pth file) by Trawl's own site-packages: a dependency the package pins wins,
everything else (Scrapy, Twisted, Django) is Trawl's. `<sha256>.lock` beside it is an flock held shared by whoever
builds the environment and by every crawl child process using it; pruning takes it exclusively without waiting, so an
environment being built or used is never removed. Builds are serialized by `<sha256>.build`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.files.storage import storages

from registry.errors import RegistryError
from registry.models import Package
from registry.packages import pip_guard
from registry.packages.wheels import wheel_inspect

logger = logging.getLogger("trawl.packages")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
LOG_KEPT = 20_000  # characters of pip's output kept in a failed version's package_log
WHEELS_ONLY = (
    "Dependencies are installed from wheels only (pip --only-binary :all:): one published only as a source "
    "distribution (sdist) is not installed, since building it runs its code on the worker. Build a wheel of it and "
    "put it in a TRAWL_PACKAGE_FIND_LINKS directory"
)
MISSING_WHEEL = (
    "Wheels uploaded before they were stored in the database stay in the directory they were written to "
    "(TRAWL_PACKAGE_DIR, var/packages/) until `manage.py trawl_packages_import` copies them over; else upload the "
    "wheel again as a new version"
)
BUILD_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
)


class EnvBuildError(Exception):
    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.log = log


@dataclass(frozen=True)
class PackageEnv:
    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        return Path(sysconfig.get_path("purelib", vars={"base": str(self.root), "platbase": str(self.root)}))

    @property
    def marker(self) -> Path:
        return self.root / ".trawl-ready"

    def ready(self) -> bool:
        return self.marker.exists()

    def workdir_made(self) -> Path:
        """The working directory of the package's children: what the project's code writes where it stands
        (Scrapy's `.scrapy/httpcache`, a pipeline's `items.jl`, a relative FEEDS or IMAGES_STORE path) stays with the
        package, as a scrapyd project's files stay in scrapyd's directory, never in Trawl's own directory where
        every other project's crawl would read it. It goes when the environment is pruned."""
        workdir = self.root / "work"
        workdir.mkdir(mode=0o700, exist_ok=True)
        return workdir

    def build_log(self) -> str:
        try:
            return json.loads(self.marker.read_text()).get("log", "")
        except (OSError, ValueError):
            return ""


def cache_dir() -> Path:
    path = Path(settings.TRAWL_PACKAGE_CACHE_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def env_of(sha256: str) -> PackageEnv:
    return PackageEnv(cache_dir() / sha256)


def env_lease(*, package: Package) -> tuple[PackageEnv, int]:
    """The package's environment, built first if this machine has none, and a file descriptor holding its lock
    shared. Whoever gets the descriptor closes it (or hands it to the process that uses the environment)."""
    env = env_of(package.sha256)
    fd = os.open(cache_dir() / f"{package.sha256}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        # Held shared while building too, so pruning (exclusive, never waiting) cannot remove a build under way.
        fcntl.flock(fd, fcntl.LOCK_SH)
        if not env.ready():
            _build_once(env=env, package=package)
        return env, fd
    except BaseException:
        os.close(fd)
        raise


def _build_once(*, env: PackageEnv, package: Package) -> None:
    """Builds are serialized by a lock of their own: upgrading the shared lock to exclusive would wait for every
    crawl holding it, hours for a long one, and forever when that holder is this process's other thread."""
    build_fd = os.open(cache_dir() / f"{package.sha256}.build", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(build_fd, fcntl.LOCK_EX)
        if not env.ready():
            env_build(env=env, package=package)
    finally:
        os.close(build_fd)


def env_build(*, env: PackageEnv, package: Package) -> None:
    """venv + pip install of the wheel and its Requires-Dist. Call with the build lock held."""
    started = time.monotonic()
    shutil.rmtree(env.root, ignore_errors=True)  # a build that died half-way left no marker: start over
    _run([sys.executable, "-m", "venv", "--without-pip", str(env.root)], what="python -m venv")
    trawl_paths = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    env.site_packages.mkdir(parents=True, exist_ok=True)
    # Appended after the environment's own site-packages: Trawl's packages count as installed for pip, and the
    # package's own pins shadow them.
    (env.site_packages / "_trawl.pth").write_text("".join(f"{path}\n" for path in trawl_paths))
    wheel = env.root / "wheel" / package.filename
    wheel.parent.mkdir()
    wheel_fetch(package=package, destination=wheel)
    try:  # checked at upload too; again here for a wheel stored before that check (a direct URL requirement)
        wheel_inspect(data=wheel.read_bytes(), filename=package.filename)
    except RegistryError as exc:
        raise EnvBuildError(f"the wheel is refused: {' '.join(exc.errors.get('package', []))}") from None
    log = _run(_pip_install(env, wheel), what="pip install")
    env.marker.write_text(json.dumps({"log": log, "seconds": round(time.monotonic() - started, 2)}))
    logger.info("package %s built in %.1fs at %s", package, time.monotonic() - started, env.root)


def wheel_fetch(*, package: Package, destination: Path) -> None:
    """Copy the package's wheel from the package storage (the database or a bucket every host reaches) to this
    machine, checking it is the wheel that was uploaded (its SHA-256). Raises EnvBuildError saying why it cannot."""
    from botocore.exceptions import BotoCoreError, ClientError  # django-storages' S3 backend raises these

    storage = storages[settings.TRAWL_PACKAGE_STORAGE]
    where = f"the package storage {settings.TRAWL_PACKAGE_STORAGE!r} ({type(storage).__name__})"
    digest = hashlib.sha256()
    try:
        with storage.open(package.path, "rb") as stored, open(destination, "wb") as copy:
            for chunk in stored.chunks():
                digest.update(chunk)
                copy.write(chunk)
    except FileNotFoundError:
        raise EnvBuildError(f"its wheel {package.path} is not in {where}. {MISSING_WHEEL}") from None
    except (OSError, BotoCoreError, ClientError) as exc:
        raise EnvBuildError(f"its wheel {package.path} could not be copied from {where}: {exc}") from None
    if digest.hexdigest() != package.sha256:
        raise EnvBuildError(
            f"its wheel {package.path} in {where} has SHA-256 {digest.hexdigest()}, not the uploaded wheel's "
            f"{package.sha256}: refused"
        )


def _pip_install(env: PackageEnv, wheel: Path) -> list[str]:
    # pip as the environment's Python runs it (Trawl's pip, through _trawl.pth), refusing direct URL requirements at
    # any depth (registry.packages.pip_guard): those are built from source whatever --only-binary says.
    command = [str(env.python), "-c", Path(pip_guard.__file__).read_text(), "install"]
    command += ["--disable-pip-version-check", "--no-input", "--progress-bar", "off"]
    # Wheels only, for the package's dependencies too: installing a source distribution runs its setup.py (any code
    # its author wrote) on this crawl worker, with the worker's access.
    command += ["--only-binary", ":all:"]
    for directory in settings.TRAWL_PACKAGE_FIND_LINKS:
        command += ["--find-links", directory]
    if settings.TRAWL_PACKAGE_NO_INDEX:
        command.append("--no-index")
    return [*command, str(wheel)]


def _run(command: list[str], *, what: str) -> str:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=settings.TRAWL_PACKAGE_BUILD_TIMEOUT,
            env=_build_environment(),
        )
    except subprocess.TimeoutExpired as exc:
        raise EnvBuildError(f"{what} took over {settings.TRAWL_PACKAGE_BUILD_TIMEOUT}s", _text(exc.output)) from None
    log = (done.stdout + done.stderr)[-LOG_KEPT:]
    if done.returncode:
        reason = _last_line(done.stderr or done.stdout)
        if "No matching distribution found" in reason:
            reason += f". {WHEELS_ONLY}"
        raise EnvBuildError(f"{what} failed (exit {done.returncode}): {reason}", log)
    return log


def _build_environment() -> dict[str, str]:
    """venv and pip get what they need of the worker's environment (pip's own configuration, proxies, certificates),
    not its secrets: an allow-list, like a packaged crawl's child (runtime.packaged.child_env)."""
    kept = {name: value for name, value in os.environ.items() if name in BUILD_ENV or name.startswith("PIP_")}
    return {**kept, "PIP_REQUIRE_VIRTUALENV": "0"}


def envs_prune(*, unused: Callable[[Iterable[str]], set[str]], only: str | None = None) -> list[str]:
    """Remove the environments `unused` names (of those on this machine), skipping any a process holds. Returns
    the hashes removed."""
    root = cache_dir()
    present = [p.name for p in root.iterdir() if p.is_dir() and SHA256.match(p.name) and p.name == (only or p.name)]
    removed = []
    for sha256 in sorted(unused(present)) if present else []:
        fd = os.open(root / f"{sha256}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # a crawl (or its warm child) still uses it: pruned when that ends
        try:
            shutil.rmtree(root / sha256, ignore_errors=True)
            removed.append(sha256)
        finally:
            os.close(fd)
    if removed:
        logger.info("package environments removed: %s", ", ".join(removed))
    return removed


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")[-LOG_KEPT:]
    return (output or "")[-LOG_KEPT:]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"
