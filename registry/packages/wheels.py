"""Reading an uploaded wheel before anything is stored: is it a wheel at all, what is it, does it hold the spider.

Pure apart from reading the file it is given. Every refusal is a RegistryError naming `package` (or `spider` when
the wheel is fine but the spider's module is not in it), so the API answers 400 and nothing is written.

It runs in a web process, on an archive an admin uploaded but someone else built: the zip is opened only when its
central directory lists at most MAX_MEMBERS members that unpack to at most MAX_UNPACKED_BYTES, none compressed more
than MAX_RATIO to one (a zip bomb is refused before a byte of it is inflated). A Requires-Dist with a direct URL
(`name @ file:///...` or `@ https://.../x.tar.gz`) is refused: pip fetches and builds such a requirement from source,
running its code on the worker, whatever `--only-binary :all:` says (registry.packages.envs refuses it again, at any
depth of the dependencies, when it builds).
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO

from packaging.requirements import InvalidRequirement, Requirement

from registry.errors import RegistryError

# PEP 427: {distribution}-{version}(-{build tag})?-{python tag}-{abi tag}-{platform tag}.whl
WHEEL_NAME = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?)-(?P<version>[^-]+)"
    r"(?:-(?P<build>\d[^-]*))?-(?P<tags>[^-]+-[^-]+-[^-]+)\.whl$"
)

MAX_MEMBERS = 10_000
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_RATIO = 200  # a member larger than RATIO_FLOOR unpacks to at most this many times its compressed size
RATIO_FLOOR = 1024 * 1024
DIRECT_URL_HELP = (
    "a direct URL reference, which pip fetches and builds from source on the worker (running its code) whatever "
    "--only-binary says. Require it by name and version, and put its wheel in a TRAWL_PACKAGE_FIND_LINKS directory "
    "or the package index"
)


class ZipRefused(ValueError):
    """An archive past the bounds (zip_open_bounded)."""


@dataclass(frozen=True)
class WheelInfo:
    sha256: str
    filename: str
    name: str
    version: str
    size: int
    requires: list[str] = field(default_factory=list)
    modules: frozenset[str] = frozenset()  # dotted names of the modules and packages it installs


def normalize(name: str) -> str:
    """PEP 503 name normalization: `Shop_Spider` and `shop-spider` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def refuse(message: str, *, field_name: str = "package") -> RegistryError:
    return RegistryError({field_name: [message]})


def wheel_read(*, file: IO[bytes], max_bytes: int) -> bytes:
    data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise refuse(f"the package is over the {max_bytes} byte limit (TRAWL_PACKAGE_MAX_BYTES)")
    return data


def wheel_inspect(*, data: bytes, filename: str) -> WheelInfo:
    """Check that `data` is a wheel pip can install and describe it. Raises RegistryError naming `package`."""
    match = WHEEL_NAME.match(filename or "")
    if match is None:
        raise refuse(f"{filename!r} is not a wheel file name (name-version-python-abi-platform.whl)")
    try:
        archive = zip_open_bounded(data, what=repr(filename))
        broken = archive.testzip()
    except ZipRefused as exc:
        raise refuse(f"{exc}: refused, unread") from None
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise refuse(f"{filename!r} is not a wheel: not a readable zip archive ({exc})") from None
    if broken is not None:
        raise refuse(f"{filename!r} is corrupt: {broken} fails its checksum")
    with archive:
        metadata, wheel = _dist_info(archive, filename)
        modules = _modules(archive.namelist())
    name, version = metadata.get("Name", ""), metadata.get("Version", "")
    if normalize(name) != normalize(match["name"]) or version != match["version"]:
        raise refuse(f"{filename!r} does not match its METADATA (Name {name!r}, Version {version!r})")
    if not str(wheel.get("Wheel-Version", "")).startswith("1."):
        raise refuse(f"{filename!r} has Wheel-Version {wheel.get('Wheel-Version')!r}; pip installs 1.x")
    requires = list(metadata.get_all("Requires-Dist") or [])
    if problem := requirements_problem(requires):
        raise refuse(f"{filename!r}: {problem}")
    return WheelInfo(
        sha256=hashlib.sha256(data).hexdigest(),
        filename=filename,
        name=name,
        version=version,
        size=len(data),
        requires=requires,
        modules=modules,
    )


def requirements_problem(requires: Iterable[str]) -> str:
    """Why these Requires-Dist cannot be installed from wheels only ("" when they can): one that is not a
    requirement, or a direct URL reference."""
    for text in requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            return f"Requires-Dist {text!r} is not a requirement pip reads ({exc})"
        if requirement.url:
            return f"Requires-Dist {text!r} is {DIRECT_URL_HELP}"
    return ""


def zip_open_bounded(data: bytes, *, what: str) -> zipfile.ZipFile:
    """`data` as a zip archive, refused (ValueError) before anything is inflated or listed when it holds more than
    MAX_MEMBERS members, unpacks to more than MAX_UNPACKED_BYTES, or has a member compressed past MAX_RATIO
    (ZipRefused); BadZipFile when it is no zip."""
    handle = io.BytesIO(data)
    end = zipfile._EndRecData(handle)  # the end record alone: its count, before the whole directory is parsed
    if end is None:
        raise zipfile.BadZipFile("no end of central directory")
    if end[zipfile._ECD_ENTRIES_TOTAL] > MAX_MEMBERS:
        raise ZipRefused(f"{what} has over {MAX_MEMBERS} members")
    archive = zipfile.ZipFile(handle)
    members = archive.infolist()
    if len(members) > MAX_MEMBERS or sum(m.file_size for m in members) > MAX_UNPACKED_BYTES:
        archive.close()
        raise ZipRefused(f"{what} unpacks to over {MAX_UNPACKED_BYTES} bytes (or over {MAX_MEMBERS} members)")
    for member in members:
        if member.file_size > RATIO_FLOOR and member.file_size > MAX_RATIO * max(1, member.compress_size):
            archive.close()
            raise ZipRefused(f"{what}: {member.filename[:100]!r} is compressed over {MAX_RATIO} to one (a zip bomb?)")
    return archive


def spider_problem(*, info: WheelInfo, spider: str) -> str | None:
    """Why `spider` cannot be a class inside this wheel, or None. Only the module is checked here: the class is
    checked by importing it inside the package's environment when it is built."""
    module, _, cls = spider.rpartition(".")
    if not module or not cls:
        return f"{spider!r} is not a dotted path to a class (package.module.SpiderClass)"
    if module not in info.modules:
        return f"module {module!r} is not in {info.filename} (it has: {', '.join(sorted(info.modules)[:10]) or '-'})"
    return None


def _dist_info(archive: zipfile.ZipFile, filename: str):
    names = set(archive.namelist())
    dist_infos = {name.split("/", 1)[0] for name in names if name.split("/", 1)[0].endswith(".dist-info")}
    if len(dist_infos) != 1:
        raise refuse(f"{filename!r} is not a wheel: it needs exactly one .dist-info directory, has {len(dist_infos)}")
    dist_info = dist_infos.pop()
    parsed = []
    for part in ("METADATA", "WHEEL"):
        if f"{dist_info}/{part}" not in names:
            raise refuse(f"{filename!r} is not a wheel: {dist_info}/{part} is missing")
        text = archive.read(f"{dist_info}/{part}").decode("utf-8", errors="replace")
        parsed.append(email.parser.Parser().parsestr(text, headersonly=True))
    return parsed


def _modules(names: list[str]) -> frozenset[str]:
    modules = set()
    for name in names:
        top = name.split("/", 1)[0]
        if top.endswith((".dist-info", ".data")) or not name.endswith(".py"):
            continue
        dotted = name[: -len(".py")].replace("/", ".")
        modules.add(dotted.removesuffix(".__init__"))
    return frozenset(modules)
