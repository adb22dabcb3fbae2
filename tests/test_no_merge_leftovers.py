"""No tracked text file keeps a merge's conflict markers: a README table with `<<<<<<<` in it once reached main."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(rb"^(<{7} |={7}$|>{7} )", re.MULTILINE)
TEXT = (".py", ".md", ".txt", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".html", ".lua", ".sh", ".json")


def test_no_tracked_file_holds_conflict_markers():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    leftovers = [
        name
        for name in listed.splitlines()
        if name.endswith(TEXT) and (ROOT / name).is_file() and MARKER.search((ROOT / name).read_bytes())
    ]
    assert leftovers == []
