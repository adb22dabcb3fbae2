"""A Django storage in the database: uploaded wheels live where every host already reaches (PostgreSQL or SQLite).

The default `STORAGES["packages"]` (docs/packages.md): one `registry.StoredFile` row per file, its bytes in a
BinaryField (bytea on PostgreSQL, a BLOB on SQLite). Files are small (a wheel is at most TRAWL_PACKAGE_MAX_BYTES) and
read whole. Writes join the caller's transaction, so a version upload that rolls back leaves no file behind. Names
are taken, never overwritten: a second save of a name gets another one (Django's `get_available_name`), as with
FileSystemStorage.
"""

from __future__ import annotations

from datetime import datetime

from django.core.files.base import ContentFile, File
from django.core.files.storage import Storage
from django.db import IntegrityError, transaction
from django.utils.deconstruct import deconstructible

from registry.models import StoredFile

NAME_MAX = StoredFile._meta.get_field("name").max_length
SAVE_ATTEMPTS = 20  # names tried when concurrent saves take the same one


@deconstructible(path="registry.packages.storage.DatabaseStorage")
class DatabaseStorage(Storage):
    def __init__(self, using: str = "default") -> None:
        self.using = using

    def _rows(self):
        return StoredFile.objects.using(self.using)

    def _open(self, name: str, mode: str = "rb") -> File:
        if any(flag in mode for flag in "wa+"):
            raise ValueError(f"the database storage opens files for reading only, not {mode!r}")
        data = self._rows().filter(name=name).values_list("data", flat=True).first()
        if data is None:
            raise FileNotFoundError(f"no file {name!r} in the database storage")
        return ContentFile(bytes(data), name=name)

    def _save(self, name: str, content: File) -> str:
        data = b"".join(content.chunks())  # from the start (File.chunks seeks to 0)
        for _ in range(SAVE_ATTEMPTS):
            try:
                with transaction.atomic(using=self.using):  # a savepoint inside the caller's transaction
                    self._rows().create(name=name, data=data, size=len(data))
                return name
            except IntegrityError:  # another process saved this name since get_available_name looked
                name = self.get_available_name(name, max_length=NAME_MAX)
        raise FileExistsError(f"no free name like {name!r} in the database storage after {SAVE_ATTEMPTS} tries")

    def get_available_name(self, name: str, max_length: int | None = None) -> str:
        return super().get_available_name(name, max_length=min(max_length or NAME_MAX, NAME_MAX))

    def exists(self, name: str) -> bool:
        return self._rows().filter(name=name).exists()

    def delete(self, name: str) -> None:
        self._rows().filter(name=name).delete()

    def size(self, name: str) -> int:
        size = self._rows().filter(name=name).values_list("size", flat=True).first()
        if size is None:
            raise FileNotFoundError(f"no file {name!r} in the database storage")
        return size

    def listdir(self, path: str) -> tuple[list[str], list[str]]:
        prefix = f"{path.strip('/')}/" if path.strip("/") else ""
        directories, files = set(), []
        for name in self._rows().filter(name__startswith=prefix).values_list("name", flat=True):
            head, _, tail = name[len(prefix) :].partition("/")
            if tail:
                directories.add(head)
            else:
                files.append(head)
        return sorted(directories), sorted(files)

    def get_created_time(self, name: str) -> datetime:
        created = self._rows().filter(name=name).values_list("created_at", flat=True).first()
        if created is None:
            raise FileNotFoundError(f"no file {name!r} in the database storage")
        return created

    def get_modified_time(self, name: str) -> datetime:
        return self.get_created_time(name)  # files are never rewritten
