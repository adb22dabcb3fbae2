"""An uploaded egg (what scrapyd-deploy builds with `bdist_egg`) or wheel, made ready for the registry: a wheel, the
project's settings module and its spiders.

The egg becomes a wheel with the pinned `wheel` package's own converter (`wheel convert`), so the version is built,
checked and run by the same machinery as any uploaded wheel. The settings module is the one the package's `scrapy`
entry point names (`[scrapy] settings = myproject.settings`, as scrapyd reads it); the spiders are found in the
package's source as `manage.py deploy` finds them in a project directory.
"""

from __future__ import annotations

import configparser
import email.parser
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote_to_bytes

from django.conf import settings as conf
from django.http import HttpRequest
from wheel.cli.convert import convert

from project.errors import TrawlError
from registry.deploy.project import SpiderClass, spider_pick, spiders_find
from registry.packages.wheels import ZipRefused, zip_open_bounded

SAFE_NAME = re.compile(r"[^A-Za-z0-9.]+")


@dataclass(frozen=True)
class Upload:
    wheel: Path
    settings_module: str
    spider: SpiderClass  # the version's own spider (a job that names none runs it)
    spider_names: tuple[str, ...]


def refuse(message: str) -> TrawlError:
    return TrawlError(message, field="egg")


def egg_posted(request: HttpRequest) -> tuple[bytes, str]:
    """The uploaded egg's bytes and file name: a file (scrapyd-deploy, python-scrapyd-api), or a plain form field as
    ScrapydWeb posts it (urlencoded: read from the raw body, since Django's form decoding would mangle the bytes)."""
    upload = request.FILES.get("egg")
    if upload is not None:
        data, filename = upload.read(conf.TRAWL_PACKAGE_MAX_BYTES + 1), upload.name or ""
    elif request.content_type == "application/x-www-form-urlencoded" and "egg" in request.POST:
        data, filename = _form_field(request.body, b"egg"), ""
    else:
        raise refuse("'egg' file is required")
    if len(data) > conf.TRAWL_PACKAGE_MAX_BYTES:
        raise refuse(f"the egg is over the {conf.TRAWL_PACKAGE_MAX_BYTES} byte limit (TRAWL_PACKAGE_MAX_BYTES)")
    return data, filename


def _form_field(body: bytes, name: bytes) -> bytes:
    """A urlencoded body's field as the bytes it was (urllib's parse_qs decodes them as text)."""
    for pair in body.split(b"&"):
        key, _, value = pair.partition(b"=")
        if unquote_to_bytes(key.replace(b"+", b" ")) == name:
            return unquote_to_bytes(value.replace(b"+", b" "))
    return b""


def upload_prepare(*, data: bytes, filename: str, out: Path) -> Upload:
    """Turn the uploaded bytes into a wheel under `out` and read what the registry needs from them."""
    try:  # bounded as a wheel is (a zip bomb is refused unread): it is extracted below, and converted
        archive = zip_open_bounded(data, what=filename or "the upload")
    except ZipRefused as exc:
        raise refuse(f"{exc}: refused, unread") from None
    except (zipfile.BadZipFile, ValueError):
        raise refuse(f"{filename or 'the upload'} is neither an egg nor a wheel (not a zip archive)") from None
    with archive:
        names = archive.namelist()
        if "EGG-INFO/PKG-INFO" in names:
            wheel = _egg_to_wheel(archive, data, out)
            entry_points = _read(archive, "EGG-INFO/entry_points.txt")
        elif filename.endswith(".whl"):
            wheel = out / Path(filename).name
            wheel.write_bytes(data)
            dist_info = next((n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")), "")
            entry_points = _read(archive, f"{dist_info}/entry_points.txt")
        else:
            raise refuse(f"{filename or 'the upload'} is neither an egg (no EGG-INFO/PKG-INFO) nor a wheel")
        source = out / "source"
        archive.extractall(source)
    settings_module = _scrapy_settings(entry_points)
    if settings_module:  # spider_pick reads SPIDER_MODULES through scrapy.cfg, as in a project directory
        (source / "scrapy.cfg").write_text(f"[settings]\ndefault = {settings_module}\n")
    try:
        spider = spider_pick(source)
    except TrawlError as exc:
        raise refuse(exc.message) from None
    names = tuple(sorted({found.name for found in spiders_find(source) if found.name}))
    return Upload(wheel=wheel, settings_module=settings_module, spider=spider, spider_names=names)


def _egg_to_wheel(archive: zipfile.ZipFile, data: bytes, out: Path) -> Path:
    info = email.parser.Parser().parsestr(archive.read("EGG-INFO/PKG-INFO").decode("utf-8", "replace"))
    name, version = info.get("Name", ""), info.get("Version", "")
    if not name or not version:
        raise refuse("the egg's EGG-INFO/PKG-INFO has no Name or Version")
    # The converter takes name and version from the file's name and the METADATA from PKG-INFO: they must agree.
    egg = out / f"{SAFE_NAME.sub('_', name)}-{SAFE_NAME.sub('_', version)}.egg"
    egg.write_bytes(data)
    converted = out / "wheel"
    converted.mkdir()
    try:
        convert([str(egg)], str(converted), False)
    except (ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise refuse(f"the egg could not be converted to a wheel: {exc}") from None
    wheels = sorted(converted.glob("*.whl"))
    if len(wheels) != 1:
        raise refuse("the egg could not be converted to a wheel")
    return wheels[0]


def _read(archive: zipfile.ZipFile, name: str) -> str:
    try:
        return archive.read(name).decode("utf-8", "replace")
    except KeyError:
        return ""


def _scrapy_settings(entry_points: str) -> str:
    """The `settings` of the `[scrapy]` entry point group, as scrapyd finds a project's settings."""
    parser = configparser.ConfigParser()
    try:
        parser.read_string(entry_points)
    except configparser.Error:
        return ""
    return parser.get("scrapy", "settings", fallback="").strip()
