"""Uploaded wheels are stored in the database by default (registry.packages.storage), so every host that reaches the
database reaches them: the storage itself, uploads into it, builds from it, and what a build does without its wheel.
Runs on SQLite, and on PostgreSQL when DATABASE_URL names one."""

from __future__ import annotations

import io
import os

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command
from django.db import transaction

from crawls.services.package_build import version_package_build
from registry.models import PackageStatus, Scraper, ScraperVersion, StoredFile
from registry.packages.envs import EnvBuildError, env_lease, env_of
from registry.packages.storage import DatabaseStorage
from registry.services.packages import version_upload
from tests.packages import dep_wheels, shop_wheel
from tests.registry.factories import make_scraper

pytestmark = pytest.mark.django_db
SPIDER = "trawlshop.spiders.ShopSpider"


@pytest.fixture
def package_dirs(settings, tmp_path):
    """This host's environments and dependency wheels; the wheels themselves go to the default storage."""
    settings.TRAWL_PACKAGE_CACHE_DIR = str(tmp_path / "envs")
    settings.TRAWL_PACKAGE_FIND_LINKS = [str(tmp_path / "wheelhouse")]
    settings.TRAWL_PACKAGE_NO_INDEX = True
    dep_wheels(tmp_path / "wheelhouse")
    return tmp_path


def uploaded(tmp_path, *, version: str = "1.0.0") -> ScraperVersion:
    wheel = shop_wheel(tmp_path / "src", version=version, output=f"v{version}", dep="2.0")
    with open(wheel, "rb") as handle:
        return version_upload(
            scraper=Scraper.objects.filter(name="shop").first() or make_scraper("shop"),
            package=handle,
            filename=wheel.name,
            version=version,
            spider=SPIDER,
        )


def test_the_database_storage_saves_reads_lists_and_deletes_files():
    storage = DatabaseStorage()
    data = bytes(range(256)) * 64  # every byte value: a BLOB / bytea round trip, not text

    assert storage.save("ab12/shop-1.0.0-py3-none-any.whl", ContentFile(data)) == "ab12/shop-1.0.0-py3-none-any.whl"
    storage.save("ab12/other.whl", ContentFile(b"x"))
    storage.save("cd34/top.whl", ContentFile(b"y"))

    assert storage.exists("ab12/shop-1.0.0-py3-none-any.whl")
    with storage.open("ab12/shop-1.0.0-py3-none-any.whl") as stored:
        assert stored.read() == data
    assert storage.size("ab12/shop-1.0.0-py3-none-any.whl") == len(data)
    assert storage.listdir("") == (["ab12", "cd34"], [])
    assert storage.listdir("ab12") == ([], ["other.whl", "shop-1.0.0-py3-none-any.whl"])
    assert storage.get_modified_time("cd34/top.whl") == StoredFile.objects.get(name="cd34/top.whl").created_at

    storage.delete("ab12/other.whl")
    storage.delete("ab12/never-there.whl")  # deleting what is not there is no error, as in FileSystemStorage
    assert not storage.exists("ab12/other.whl")
    with pytest.raises(FileNotFoundError, match=r"ab12/other\.whl"):
        storage.open("ab12/other.whl")
    with pytest.raises(FileNotFoundError):
        storage.size("ab12/other.whl")
    with pytest.raises(FileNotFoundError):
        storage.get_created_time("ab12/other.whl")


def test_a_taken_name_is_never_overwritten_and_files_open_for_reading_only():
    storage = DatabaseStorage()
    storage.save("ab12/a.whl", ContentFile(b"first"))

    second = storage.save("ab12/a.whl", ContentFile(b"second"))

    assert second != "ab12/a.whl" and second.startswith("ab12/a_")
    assert storage.open("ab12/a.whl").read() == b"first"
    assert storage.open(second).read() == b"second"
    with pytest.raises(ValueError, match="reading only"):
        storage.open("ab12/a.whl", "wb")


def test_a_wheel_of_the_largest_size_accepted_round_trips(settings):
    data = os.urandom(settings.TRAWL_PACKAGE_MAX_BYTES)

    DatabaseStorage().save("big/big.whl", ContentFile(data))

    assert DatabaseStorage().open("big/big.whl").read() == data
    assert StoredFile.objects.get(name="big/big.whl").size == settings.TRAWL_PACKAGE_MAX_BYTES


def test_uploads_go_to_the_database_and_a_rolled_back_upload_leaves_no_file(package_dirs, tmp_path):
    assert isinstance(storages["packages"], DatabaseStorage), "the default package storage is the database"

    version = uploaded(tmp_path)

    stored = StoredFile.objects.get()
    assert stored.name == version.package.path == f"{version.package.sha256}/{version.package.filename}"
    assert bytes(stored.data) == (tmp_path / "src" / "1.0.0" / version.package.filename).read_bytes()
    assert not any(tmp_path.rglob("packages")), "nothing written to this host's disk"

    with pytest.raises(RuntimeError), transaction.atomic():
        uploaded(tmp_path, version="2.0.0")
        assert StoredFile.objects.count() == 2
        raise RuntimeError("the request failed after the upload")
    assert StoredFile.objects.count() == 1, "the file went with the rolled-back version"


def test_a_host_without_the_environment_builds_it_from_the_database(package_dirs, tmp_path):
    version = uploaded(tmp_path)
    assert not env_of(version.package.sha256).ready(), "no environment on this host yet"

    env, fd = env_lease(package=version.package)
    os.close(fd)

    assert env.ready()
    assert (env.root / "wheel" / version.package.filename).read_bytes() == bytes(StoredFile.objects.get().data)


def test_a_build_whose_wheel_is_missing_ends_the_version_failed_saying_why(package_dirs, tmp_path):
    version = uploaded(tmp_path)
    StoredFile.objects.all().delete()  # lost: say, restored from a backup taken before the upload

    assert version_package_build(version_id=version.pk) == PackageStatus.FAILED

    version.refresh_from_db()
    assert version.package_status == PackageStatus.FAILED
    first_line = version.package_log.splitlines()[0]
    assert f"its wheel {version.package.path} is not in the package storage 'packages'" in first_line
    assert "trawl_packages_import" in first_line


def test_a_wheel_changed_in_storage_is_refused(package_dirs, tmp_path):
    version = uploaded(tmp_path)
    # Someone with write access to the storage swaps in a valid wheel of the same name and version, other code.
    other = shop_wheel(tmp_path / "other", version="1.0.0", output="swapped", dep="2.0")
    StoredFile.objects.filter(name=version.package.path).update(data=other.read_bytes())

    with pytest.raises(EnvBuildError, match=r"has SHA-256 .* not the uploaded wheel's .*: refused"):
        env_lease(package=version.package)
    assert not env_of(version.package.sha256).ready(), "nothing of the swapped wheel was installed"


def test_a_build_that_raises_ends_the_version_failed_never_building(package_dirs, tmp_path, settings):
    version = uploaded(tmp_path)
    settings.TRAWL_PACKAGE_STORAGE = "no-such-storage"  # a misconfigured host: not a fetch error, a fault

    with pytest.raises(Exception, match="no-such-storage"):
        version_package_build(version_id=version.pk)

    version.refresh_from_db()
    assert version.package_status == PackageStatus.FAILED
    assert "the build on this worker raised InvalidStorageError" in version.package_log


def test_trawl_packages_import_copies_wheels_of_an_older_install_from_the_old_directory(package_dirs, tmp_path):
    kept, lost, changed = (uploaded(tmp_path, version=v).package for v in ("1.0.0", "2.0.0", "3.0.0"))
    old = tmp_path / "var-packages"  # as FileSystemStorage left them: <sha256>/<file name>
    for package in (kept, changed):
        (old / package.sha256).mkdir(parents=True)
        (old / package.path).write_bytes(bytes(StoredFile.objects.get(name=package.path).data))
    (old / changed.path).write_bytes(b"tampered")
    StoredFile.objects.all().delete()

    dry = io.StringIO()
    call_command("trawl_packages_import", "--from", str(old), "--dry-run", stdout=dry, stderr=io.StringIO())
    assert f"{kept.path}: would copy" in dry.getvalue()
    assert not StoredFile.objects.exists()

    out, err = io.StringIO(), io.StringIO()
    call_command("trawl_packages_import", "--from", str(old), stdout=out, stderr=err)

    assert list(StoredFile.objects.values_list("name", flat=True)) == [kept.path]
    assert f"{lost.path}: not in the directory" in out.getvalue()
    assert f"{changed.path}: differs from the upload (SHA-256): not copied" in out.getvalue()
    assert "copied 1, already stored 0, missing 1, differing 1 (of 3 packages)" in out.getvalue()
    assert "upload those wheels again" in err.getvalue()
    again = io.StringIO()
    call_command("trawl_packages_import", "--from", str(old), stdout=again, stderr=io.StringIO())
    assert "copied 0, already stored 1" in again.getvalue()
    env, fd = env_lease(package=kept)  # and a host builds it from there
    os.close(fd)
    assert env.ready()
