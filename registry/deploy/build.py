"""Build a Scrapy project into a wheel, offline, with the build backend already in Trawl's environment.

`pip wheel --no-deps --no-build-isolation`: no dependency is downloaded or built (the wheel's Requires-Dist are the
workers' business, installed from wheels when the version is built), and the backend (setuptools + wheel, which
requirements.txt pins) comes from this environment instead of the index. The project is copied first, so the build
leaves no `build/` or `*.egg-info` behind in the developer's tree.
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
from registry.deploy.project import SKIPPED_DIRS, project_check

BUILD_TIMEOUT = 300


def wheel_build(directory: Path, *, out: Path) -> Path:
    """The project's wheel, written into `out`."""
    project_check(directory)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trawl-deploy-") as scratch:
        source = Path(scratch) / directory.resolve().name
        shutil.copytree(directory, source, ignore=shutil.ignore_patterns(*SKIPPED_DIRS, "*.egg-info", "*.pyc"))
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


def wheel_version(wheel: Path) -> str:
    """The Version in the wheel's METADATA (the project's own version)."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(metadata).decode()).get("Version", "")
