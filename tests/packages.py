"""Wheels built inside tests from small source trees: zipfile + METADATA/WHEEL/RECORD, as pip expects them.

No build backend and no network: `wheel_build` writes the archive itself. `shop_wheel` is a spider project whose
items say which code produced them (`output`) and which version of the `trawltestdep` dependency it imported.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Iterable
from pathlib import Path

SPIDER = """
import scrapy
{dep_import}

OUTPUT = {output!r}


class ShopSpider(scrapy.Spider):
    name = "packaged_shop"

    def __init__(self, url=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [url]

    def parse(self, response):
        self.logger.info("packaged %s parsed %s", OUTPUT, response.url)
        yield {{"url": response.url, "output": OUTPUT, "dep": {dep_value}, "title": response.css("h1::text").get()}}
        for href in response.css("a.product::attr(href), a.next::attr(href)").getall():
            yield response.follow(href, self.parse)


class FollowSpider(ShopSpider):
    # Follows every link: on the test site's endless /slow/ chain it runs until stopped.
    name = "packaged_follow"

    def parse(self, response):
        self.logger.info("packaged %s parsed %s", OUTPUT, response.url)
        yield {{"url": response.url, "output": OUTPUT}}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)


class RaisingSpider(ShopSpider):
    name = "packaged_raising"

    def parse(self, response):
        raise ValueError(f"{{OUTPUT}} cannot parse {{response.url}}")
"""


def wheel_build(
    directory: Path, *, name: str, version: str, files: dict[str, str], requires: Iterable[str] = ()
) -> Path:
    dist_info = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {requirement}\n" for requirement in requires)
    entries = {
        **files,
        f"{dist_info}/METADATA": metadata,
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: trawl-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={_digest(text.encode())},{len(text.encode())}" for path, text in entries.items()]
    entries[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, text in entries.items():
            archive.writestr(member, text)
    return path


def dep_wheels(wheelhouse: Path) -> None:
    """Two versions of a tiny dependency, as a local wheel directory pip installs from with --no-index."""
    for version in ("1.0", "2.0"):
        wheel_build(
            wheelhouse,
            name="trawltestdep",
            version=version,
            files={"trawltestdep/__init__.py": f"VALUE = 'dep-{version}'\n"},
        )


def shop_wheel(
    directory: Path, *, version: str, output: str, dep: str | None = None, module: str = "trawlshop"
) -> Path:
    """A spider project `module` (spider at `<module>.spiders.ShopSpider`), needing `trawltestdep==<dep>` if given."""
    spider = SPIDER.format(
        output=output,
        dep_import="import trawltestdep" if dep else "",
        dep_value="trawltestdep.VALUE" if dep else "None",
    )
    files = {f"{module}/__init__.py": "", f"{module}/spiders.py": spider}
    requires = ["scrapy>=2.11", *([f"trawltestdep=={dep}"] if dep else [])]
    return wheel_build(directory / version, name=module, version=version, files=files, requires=requires)


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def hostile_source_tree(directory: Path, *, marker: Path) -> Path:
    """A source tree whose build backend lives in the tree and needs nothing: anything that asks it for metadata (pip
    preparing a direct URL requirement, `--dry-run` included) runs it, and it writes `marker`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pyproject.toml").write_text(
        '[project]\nname = "trawlevil"\nversion = "1.0"\n'
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    (directory / "backend.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "def get_requires_for_build_wheel(config_settings=None):\n    return []\n"
        "def prepare_metadata_for_build_wheel(directory, config_settings=None):\n    raise RuntimeError('ran')\n"
        "def build_wheel(directory, config_settings=None, metadata_directory=None):\n    raise RuntimeError('ran')\n"
    )
    return directory
