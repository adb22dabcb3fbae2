"""Where `deploy` registers the version: this installation (its services and database) or a remote Trawl (its REST
API, the same multipart upload as `curl -F package=@...`). Both answer with the API's version JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import requests

from project.errors import TrawlError

HTTP_TIMEOUT = 60


class Target(Protocol):
    where: str

    def scraper_ensure(self, name: str) -> bool: ...  # True: it was created

    def versions(self, name: str) -> list[dict[str, Any]]: ...

    def upload(self, name: str, wheel: Path, fields: dict[str, Any]) -> dict[str, Any]: ...

    def version(self, name: str, version: str) -> dict[str, Any]: ...

    def make_default(self, name: str, version: str) -> dict[str, Any]: ...


class LocalTarget:
    """This installation, through the registry's services: the same checks as the API, no token needed."""

    where = "this installation"

    def scraper_ensure(self, name: str) -> bool:
        from registry.models import Scraper
        from registry.services import scraper_create

        if Scraper.objects.filter(name=name).exists():
            return False
        scraper_create(name=name)
        return True

    def versions(self, name: str) -> list[dict[str, Any]]:
        from registry.models import ScraperVersion
        from registry.serializers import VersionSerializer

        return VersionSerializer(ScraperVersion.objects.filter(scraper__name=name), many=True).data

    def upload(self, name: str, wheel: Path, fields: dict[str, Any]) -> dict[str, Any]:
        from registry.models import Scraper
        from registry.serializers import VersionSerializer
        from registry.services.packages import version_upload

        with wheel.open("rb") as package:
            created = version_upload(
                scraper=Scraper.objects.get(name=name), package=package, filename=wheel.name, **fields
            )
        return VersionSerializer(created).data

    def version(self, name: str, version: str) -> dict[str, Any]:
        from registry.models import ScraperVersion
        from registry.serializers import VersionSerializer

        return VersionSerializer(ScraperVersion.objects.get(scraper__name=name, version=version)).data

    def make_default(self, name: str, version: str) -> dict[str, Any]:
        from registry.models import ScraperVersion
        from registry.serializers import VersionSerializer
        from registry.services import version_make_default

        made = version_make_default(version=ScraperVersion.objects.get(scraper__name=name, version=version))
        return VersionSerializer(made).data


class RemoteTarget:
    """A Trawl at `url`, with an admin API token."""

    def __init__(self, url: str, token: str) -> None:
        if not token:
            raise TrawlError("a remote deploy needs an admin API token: --token or TRAWL_TOKEN", field="token")
        self.base = url.rstrip("/")
        self.where = self.base
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def scraper_ensure(self, name: str) -> bool:
        if self._call("GET", f"/api/scrapers/{name}/", allow_404=True) is not None:
            return False
        self._call("POST", "/api/scrapers/", json={"name": name})
        return True

    def versions(self, name: str) -> list[dict[str, Any]]:
        found, path = [], f"/api/scrapers/{name}/versions/?limit=500"
        while path:
            page = self._call("GET", path)
            found.extend(page["results"])
            path = page.get("next") or ""
        return found

    def upload(self, name: str, wheel: Path, fields: dict[str, Any]) -> dict[str, Any]:
        form = {key: json.dumps(value) if isinstance(value, dict) else str(value) for key, value in fields.items()}
        with wheel.open("rb") as package:
            return self._call("POST", f"/api/scrapers/{name}/versions/", data=form, files={"package": package})

    def version(self, name: str, version: str) -> dict[str, Any]:
        return self._call("GET", f"/api/scrapers/{name}/versions/{version}/")

    def make_default(self, name: str, version: str) -> dict[str, Any]:
        return self._call("POST", f"/api/scrapers/{name}/versions/{version}/default/")

    def _call(self, method: str, path: str, *, allow_404: bool = False, **kwargs: Any) -> Any:
        url = path if path.startswith("http") else f"{self.base}{path}"
        try:
            response = self.session.request(method, url, timeout=HTTP_TIMEOUT, **kwargs)
        except requests.RequestException as exc:
            raise TrawlError(f"cannot reach {self.base}: {exc}", field="url") from None
        if allow_404 and response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise TrawlError(f"{method} {url} answered {response.status_code}: {response.text[:2000]}")
        return response.json()
