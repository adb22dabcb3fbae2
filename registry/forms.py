"""Admin forms that apply the registry services' rules before anything is saved, so errors show by the inputs."""

from __future__ import annotations

import copy

from django import forms
from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.forms.models import BaseInlineFormSet

from registry.errors import RegistryError
from registry.models import PackageStatus, Scraper, ScraperVersion
from registry.packages.wheels import spider_problem, wheel_inspect, wheel_read
from registry.services import allocation_problem, versions_problems


class VersionForm(forms.ModelForm):
    """A single version's change page: the allocation, default and precedence rules, judged like the API does.

    On the add page a wheel may be uploaded as the version's code (`package_file`): it is checked here like the API
    checks it, and the admin saves through the same service (`version_upload`)."""

    package_file = forms.FileField(
        required=False,
        label="Package",
        help_text="A wheel (.whl) holding the spider, with its dependencies declared. Empty: the spider is installed "
        "in the workers.",
    )

    class Meta:
        model = ScraperVersion
        fields = [
            "scraper",
            "version",
            "variant",
            "spider",
            "is_default",
            "traffic_pct",
            "min_priority",
            "settings",
        ]

    def clean(self):
        cleaned = super().clean()
        self._check_package(cleaned)
        scraper = cleaned.get("scraper") or getattr(self.instance, "scraper", None)
        if self.errors or scraper is None:
            return cleaned
        candidate = copy.copy(self.instance)
        for name, value in cleaned.items():
            if name != "package_file":
                setattr(candidate, name, value)
        for field, messages in versions_problems(scraper=scraper, versions=[candidate], fields=list(cleaned)).items():
            for message in messages:
                self.add_error(field if field in self.fields else NON_FIELD_ERRORS, message)
        return cleaned

    def _check_package(self, cleaned: dict) -> None:
        upload = cleaned.get("package_file")
        if not upload or self.instance.pk:
            return
        # Before the model's own checks run: a packaged spider is imported in its environment, not in this process.
        self.instance.package_status = PackageStatus.BUILDING
        try:
            info = wheel_inspect(
                data=wheel_read(file=upload, max_bytes=settings.TRAWL_PACKAGE_MAX_BYTES), filename=upload.name
            )
        except RegistryError as exc:
            self.add_error("package_file", " ".join(exc.errors["package"]))
            return
        finally:
            upload.seek(0)
        problem = spider_problem(info=info, spider=cleaned.get("spider") or "")
        if problem and "spider" in cleaned:
            self.add_error("spider", problem)


class VersionInlineFormSet(BaseInlineFormSet):
    """All of a scraper's versions edited at once: judged together (sum of traffic, one default) before saving."""

    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        # Every row, as shown: two ticked defaults are a mistake to point out, not something to settle silently.
        kept = [f for f in self.forms if (f.has_changed() or f.instance.pk) and not self._should_delete_form(f)]
        if not kept:
            return
        editable = {f.name for f in ScraperVersion._meta.fields} - {"id", self.fk.name}
        fields = [name for name in kept[0].fields if name in editable]
        problems = versions_problems(scraper=self.instance, versions=[f.instance for f in kept], fields=fields)
        if problems:
            raise ValidationError([f"{field}: {message}" for field, msgs in problems.items() for message in msgs])


class TrafficForm(forms.Form):
    """One percentage per active version of a scraper: the whole split, as `PUT /api/scrapers/{name}/traffic/`."""

    def __init__(self, *args, scraper: Scraper, versions: list[ScraperVersion], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.scraper = scraper
        self.versions = versions
        for version in versions:
            label = f"{version.version} ({version.variant}{', default' if version.is_default else ''})"
            self.fields[f"pct_{version.pk}"] = forms.IntegerField(
                label=label, min_value=0, max_value=100, initial=version.traffic_pct
            )

    def clean(self):
        cleaned = super().clean()
        if not self.errors:
            problem = allocation_problem(scraper=self.scraper, total=sum(cleaned.values()))
            if problem:
                raise ValidationError(problem)
        return cleaned

    def allocation(self) -> dict[str, int]:
        return {v.version: self.cleaned_data[f"pct_{v.pk}"] for v in self.versions}
