"""Reading an uploaded wheel before anything is stored: is it a wheel at all, what is it, does it hold the spider.

Pure apart from reading the file it is given. Every refusal is a RegistryError naming `package` (or `spider` when
the wheel is fine but the spider's module is not in it), so the API answers 400 and nothing is written.
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import re
import zipfile
from dataclasses import dataclass, field
from typing import IO

from registry.errors import RegistryError

# PEP 427: {distribution}-{version}(-{build tag})?-{python tag}-{abi tag}-{platform tag}.whl
WHEEL_NAME = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?)-(?P<version>[^-]+)"
    r"(?:-(?P<build>\d[^-]*))?-(?P<tags>[^-]+-[^-]+-[^-]+)\.whl$"
)


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
        archive = zipfile.ZipFile(io.BytesIO(data))
        broken = archive.testzip()
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
    return WheelInfo(
        sha256=hashlib.sha256(data).hexdigest(),
        filename=filename,
        name=name,
        version=version,
        size=len(data),
        requires=list(metadata.get_all("Requires-Dist") or []),
        modules=modules,
    )


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
