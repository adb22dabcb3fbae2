"""scrapyd's JSON API on Trawl: thin views over the registry's and crawls' services and this app's selectors."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, JsonResponse

from crawls.models import ACTIVE_STATUSES, CrawlJob, JobStatus
from crawls.serializers import JobCreateSerializer
from crawls.services import job_cancel, job_create
from registry.models import PackageStatus
from registry.services import scraper_create, version_deprecate, version_make_default
from registry.services.packages import version_upload
from scrapyd import selectors
from scrapyd.eggs import egg_posted, upload_prepare
from scrapyd.labels import label_of, version_for_label
from scrapyd.schedule import job_request
from scrapyd.web import ScrapydError, endpoint, ok, required

STATES = {JobStatus.QUEUED: "pending", JobStatus.RUNNING: "running"}  # every other status is scrapyd's "finished"


def state_of(job: CrawlJob) -> str:
    return STATES.get(job.status, "finished")


def spider_of(job: CrawlJob) -> str:
    """The spider's name as scrapyd's clients know it: the one scheduled, else the version's spider class."""
    return job.spider or (job.version.spider.rpartition(".")[2] if job.version else "")


@endpoint(methods=("GET",))
def daemonstatus(request: HttpRequest, requester, params) -> JsonResponse:
    """The requester's jobs by scrapyd state (every job's for an admin)."""
    counts = dict.fromkeys(("pending", "running", "finished"), 0)
    for job_status, count in selectors.job_counts(requester=requester).items():
        counts[STATES.get(job_status, "finished")] += count
    return ok(**counts)


@endpoint(methods=("POST",), admin=True)
def addversion(request: HttpRequest, requester, params) -> JsonResponse:
    """An egg (scrapyd-deploy's) or a wheel becomes the project's newest version and, as in scrapyd, the one that
    runs; the project (a scraper) is created on its first upload. As scrapyd answers once it has listed the egg's
    spiders, the answer waits for a worker's build (TRAWL_SCRAPYD_BUILD_WAIT_SECONDS at most): a version that does
    not load is an error (the last good version stays the default), `spiders` the spiders Scrapy found in it."""
    project, label = required(params, "project"), required(params, "version")
    data, filename = egg_posted(request)
    if selectors.project_version(project=project, label=label):
        raise ScrapydError(f"project {project!r} already has a version {label!r}: upload under a new version")
    with tempfile.TemporaryDirectory(prefix="trawl-scrapyd-") as out:
        prepared = upload_prepare(data=data, filename=filename, out=Path(out))
        with transaction.atomic():
            scraper = selectors.project_named(project) or scraper_create(name=project)
            existing = [v.version for v in selectors.all_versions(project=project)]
            try:
                version = version_for_label(label, existing=existing)
            except ValueError as exc:
                raise ScrapydError(str(exc)) from None
            with prepared.wheel.open("rb") as wheel:
                created = version_upload(
                    scraper=scraper,
                    package=wheel,
                    filename=prepared.wheel.name,
                    version=version,
                    spider=prepared.spider.path,
                    is_default=True,
                    settings_module=prepared.settings_module,
                )
    built = selectors.version_built(version_id=created.pk, seconds=settings.TRAWL_SCRAPYD_BUILD_WAIT_SECONDS)
    if built.package_status == PackageStatus.FAILED:
        raise ScrapydError(f"{project} {label} does not load on Trawl's workers: {built.build_failure}")
    spiders = len(built.spiders) if built.package_status == PackageStatus.READY else len(prepared.spider_names)
    return ok(project=project, version=label_of(created.version), spiders=spiders)


@endpoint(methods=("POST",))
def schedule(request: HttpRequest, requester, params) -> JsonResponse:
    """A job of the project's spider, by name; every parameter scrapyd does not define is a spider argument."""
    project, _spider = required(params, "project"), required(params, "spider")
    data = job_request(params)
    if params.get("_version"):
        version = selectors.project_version(project=project, label=params["_version"])
        if version is None:
            raise ScrapydError(f"project {project!r} has no version {params['_version']!r}")
        data["version"] = version.version
    spec = JobCreateSerializer(data=data)
    spec.is_valid(raise_exception=True)
    job = job_create(requester=requester, **spec.validated_data)
    return ok(jobid=str(job.pk))


@endpoint(methods=("POST",))
def cancel(request: HttpRequest, requester, params) -> JsonResponse:
    """Cancel one of the requester's jobs; `prevstate` is its state before (a finished job stays as it ended)."""
    project, job_id = required(params, "project"), required(params, "job")
    job = selectors.project_job(requester=requester, job_id=job_id, project=project)
    if job is None:
        return ok(prevstate=None)
    before = state_of(job)
    if job.status in ACTIVE_STATUSES:
        job_cancel(job=job)
    return ok(prevstate=before)


@endpoint(methods=("GET",))
def status(request: HttpRequest, requester, params) -> JsonResponse:
    job = selectors.project_job(requester=requester, job_id=required(params, "job"), project=params.get("project", ""))
    if job is None:
        return ok(currstate="unknown")
    return ok(currstate=state_of(job), start_time=_time(job.started_at), end_time=_time(job.finished_at))


@endpoint(methods=("GET",))
def listprojects(request: HttpRequest, requester, params) -> JsonResponse:
    return ok(projects=selectors.projects())


@endpoint(methods=("GET",))
def listversions(request: HttpRequest, requester, params) -> JsonResponse:
    versions = selectors.project_versions(project=required(params, "project"))
    return ok(versions=[label_of(v.version) for v in versions])


@endpoint(methods=("GET",))
def listspiders(request: HttpRequest, requester, params) -> JsonResponse:
    """The spiders of the version named by `_version`, else of the default (what runs); empty while it builds."""
    project = required(params, "project")
    versions = selectors.project_versions(project=project)
    if params.get("_version"):
        version = selectors.project_version(project=project, label=params["_version"])
        if version is None:
            raise ScrapydError(f"project {project!r} has no version {params['_version']!r}")
    else:
        version = next((v for v in versions if v.is_default), versions[-1] if versions else None)
    if version is None:
        raise ScrapydError(f"project {project!r} not found")
    return ok(spiders=sorted(version.spiders or {}))


@endpoint(methods=("GET",))
def listjobs(request: HttpRequest, requester, params) -> JsonResponse:
    shapes: dict[str, list] = {"pending": [], "running": [], "finished": []}
    for job in selectors.project_jobs_listed(requester=requester, project=params.get("project", "")):
        shapes[state_of(job)].append(_job_shape(request, job))
    return ok(**shapes)


@endpoint(methods=("POST",), admin=True)
def delversion(request: HttpRequest, requester, params) -> JsonResponse:
    """The version stops running for good (deprecated: Trawl keeps it for its jobs' history); the newest version
    left becomes the one that runs, as in scrapyd."""
    project, label = required(params, "project"), required(params, "version")
    version = selectors.project_version(project=project, label=label)
    if version is None:
        raise ScrapydError(f"project {project!r} has no version {label!r}")
    with transaction.atomic():
        _retire(version, others=[v for v in selectors.project_versions(project=project) if v.pk != version.pk])
    return ok()


@endpoint(methods=("POST",), admin=True)
def delproject(request: HttpRequest, requester, params) -> JsonResponse:
    project = required(params, "project")
    versions = selectors.project_versions(project=project)
    if not versions:
        raise ScrapydError(f"project {project!r} not found")
    with transaction.atomic():
        for version in sorted(versions, key=lambda v: v.is_default):  # the default last: it goes once it is alone
            version_deprecate(version=version)
    return ok()


def _retire(version, *, others: list) -> None:
    if version.is_default and others:
        version_make_default(version=others[-1])
    version_deprecate(version=version)


def _time(moment) -> str | None:
    return moment.isoformat(sep=" ") if moment else None


def _job_shape(request: HttpRequest, job: CrawlJob) -> dict:
    shape = {
        "id": str(job.pk),
        "project": job.scraper.name,
        "spider": spider_of(job),
        "version": label_of(job.version.version) if job.version else (job.requested_version or None),
    }
    if job.status == JobStatus.QUEUED:
        return {**shape, "settings": job.options, "args": job.args}
    shape.update(
        pid=None,
        start_time=_time(job.started_at),
        log_url=request.build_absolute_uri(f"/api/jobs/{job.pk}/log/"),
        items_url=request.build_absolute_uri(f"/api/jobs/{job.pk}/items/"),
    )
    if job.status not in ACTIVE_STATUSES:  # `outcome`: Trawl's own ending (succeeded, failed, cancelled, dead)
        shape.update(end_time=_time(job.finished_at), outcome=job.status)
    return shape
