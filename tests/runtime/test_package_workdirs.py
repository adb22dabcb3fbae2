"""Each package child starts in an empty working directory of its own, never Trawl's own directory, and the directory
goes with the child: what a project writes where it stands (Scrapy's `.scrapy/httpcache`, a pipeline's
`items.jl`) is neither written into the installation nor read by another project's crawl. Real children of a real
package environment; their working directory read from /proc."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from crawls.services.crawl_spec import package_spec_of
from project.env import BASE_DIR
from runtime.packaged.children import child_discard, child_for
from runtime.settings.compose import child_pool
from tests.registry.test_package_envs import package_dirs, packaged  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def gone(path: Path, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not path.exists()


def test_each_child_works_in_a_directory_of_its_own_removed_when_it_exits(tmp_path, redis_server):
    version = packaged(tmp_path, dep="1.0")
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = Path(tempfile.mkdtemp(prefix=f"trawl-child-{dead.pid}-"))  # a killed worker's child's
    (leftover / "items.jl").write_text("{}\n")
    ours = Path(tempfile.mkdtemp(prefix=f"trawl-child-{os.getpid()}-"))  # a live worker's (this one): kept

    first = child_for(package_spec_of(version.package), pool=child_pool())
    second = child_for(package_spec_of(version.package), pool=child_pool())  # the first is taken: another child
    try:
        cwds = [Path(os.readlink(f"/proc/{child.process.pid}/cwd")) for child in (first, second)]
        assert cwds[0] != cwds[1] and BASE_DIR not in (cwds[0], *cwds[0].parents), cwds
        for cwd in cwds:
            assert cwd.parent == Path(tempfile.gettempdir()) and stat.S_IMODE(cwd.stat().st_mode) == 0o700, cwd
            assert list(cwd.iterdir()) == [], "an empty directory"
        assert not leftover.exists(), "the directory of a worker process that no longer runs is removed"
        assert ours.exists(), "a running worker's is not"
        (cwds[0] / ".scrapy").mkdir()  # as Scrapy's HTTP cache would, relative to where the child stands
    finally:
        child_discard(first)
        child_discard(second)
        ours.rmdir()
    assert all(gone(cwd) for cwd in cwds), "each child's directory goes when it exits"
