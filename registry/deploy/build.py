"""Build a Scrapy project into a wheel, offline, with the build backend already in Trawl's environment.

`pip wheel --no-deps --no-build-isolation`: no dependency is downloaded or built (the wheel's Requires-Dist are the
workers' business, installed from wheels when the version is built), and the backend (setuptools + wheel, which
requirements.txt pins) comes from this environment instead of the index. The project is copied first, so the build
leaves no `build/` or `*.egg-info` behind in the developer's tree; a `scrapy startproject` project with neither
pyproject.toml nor setup.py gets a setup.py in that copy, as scrapyd-deploy writes one (never in the project's tree).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

from project.errors import TrawlError
from registry.deploy.project import SKIPPED_DIRS, has_build_file, project_check, project_name_of, settings_module_of

BUILD_TIMEOUT = 300
GENERATED_VERSION = "1.0"  # a generated setup's distribution version: the deploy chooses the scraper's version
SETUP_PY = """# Written by Trawl's deploy into its build copy of the project (as scrapyd-deploy writes one).
from setuptools import find_packages, setup

setup(
    name={name!r},
    version={version!r},
    package_dir={package_dir!r},
    packages=find_packages({where!r}, exclude=["tests", "tests.*"]),
    entry_points={{"scrapy": ["settings = {settings}"]}},
)
"""


def wheel_build(directory: Path, *, out: Path) -> Path:
    """The project's wheel, written into `out`."""
    project_check(directory)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trawl-deploy-") as scratch:
        source = Path(scratch) / directory.resolve().name
        shutil.copytree(directory, source, ignore=shutil.ignore_patterns(*SKIPPED_DIRS, "*.egg-info", "*.pyc"))
        if not has_build_file(source):
            setup_generate(source)
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        try:
            ran = subprocess.run(
                [*command, "--wheel-dir", str(out), str(source)],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TrawlError(f"building the wheel took over {BUILD_TIMEOUT}s", field="project") from None
    if ran.returncode != 0:
        raise TrawlError(f"pip could not build a wheel of {directory}:\n{ran.stdout}{ran.stderr}", field="project")
    wheels = sorted(out.glob("*.whl"), key=lambda path: path.stat().st_mtime)
    if not wheels:
        raise TrawlError(f"pip built no wheel of {directory}:\n{ran.stdout}", field="project")
    return wheels[-1]


def setup_generate(source: Path) -> Path:
    """A minimal setup.py in `source` (a build copy): the packages under it (or under src/), and the settings module
    scrapy.cfg names as the `scrapy` entry point, as scrapyd-deploy's."""
    settings = settings_module_of(source)
    if not settings:
        raise TrawlError(
            f"{source.name} has neither pyproject.toml nor setup.py, nor a scrapy.cfg naming its settings module "
            f"([settings] default = ...): nothing to build",
            field="project",
        )
    top = settings.partition(".")[0]
    where = "src" if not (source / top).is_dir() and (source / "src" / top).is_dir() else "."
    if not (source / where / top / "__init__.py").is_file():
        raise TrawlError(f"the settings module {settings!r} is not in a package of {source.name}", field="project")
    setup = source / "setup.py"
    name = project_name_of(source)
    package_dir = {"": "src"} if where == "src" else {}
    setup.write_text(
        SETUP_PY.format(name=name, version=GENERATED_VERSION, package_dir=package_dir, where=where, settings=settings)
    )
    return setup


def wheel_version(wheel: Path) -> str:
    """The Version in the wheel's METADATA (the project's own version)."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(metadata).decode()).get("Version", "")
