"""scrapyd's JSON API under /scrapyd/: request and response shapes, basic auth with a requester's token, tenancy.
The egg is the zip scrapyd-deploy's bdist_egg makes (EGG-INFO beside the project's package); a worker never builds
it here (tests/e2e/test_scrapyd.py runs one)."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from functools import partial

import pytest
from django.test import Client

from access.services import token_issue
from crawls.models import CrawlJob, JobStatus
from registry.models import PackageStatus, ScraperVersion

pytestmark = pytest.mark.django_db

EGG = {
    "EGG-INFO/PKG-INFO": "Metadata-Version: 2.1\nName: project\nVersion: 1.0\n",
    "EGG-INFO/entry_points.txt": "[scrapy]\nsettings = myproject.settings\n",
    "EGG-INFO/top_level.txt": "myproject\n",
    "myproject/__init__.py": "",
    "myproject/settings.py": "BOT_NAME = 'myproject'\nSPIDER_MODULES = ['myproject.spiders']\n",
    "myproject/spiders/__init__.py": "",
    "myproject/spiders/books.py": "import scrapy\n\nclass Books(scrapy.Spider):\n    name = 'books'\n",
    "myproject/spiders/toscrape-css.py": "import scrapy\n\nclass Css(scrapy.Spider):\n    name = 'toscrape-css'\n",
}


def egg(files=EGG, *, compression: int = zipfile.ZIP_STORED) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    buffer.seek(0)
    buffer.name = "project.egg"  # what scrapyd-client sends
    return buffer


def client(name: str, *, admin: bool = False) -> Client:
    _, token = token_issue(requester_name=name, admin=admin)
    auth = base64.b64encode(f"{name}:{token}".encode()).decode()
    return Client(HTTP_AUTHORIZATION=f"Basic {auth}")


@pytest.fixture(autouse=True)
def package_dirs(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "packages": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": tmp_path / "s"}},
    }


@pytest.fixture(autouse=True)
def no_build_worker(settings):
    """No crawl worker builds here: addversion.json answers at once (the tests mark versions built themselves)."""
    settings.TRAWL_SCRAPYD_BUILD_WAIT_SECONDS = 0


@pytest.fixture
def admin():
    return client("deployer", admin=True)


@pytest.fixture
def alice():
    return client("alice")


def built(project="myproject", label="1700000000"):
    """A deployed version as a worker leaves it once built: ready, its spiders known."""
    version = ScraperVersion.objects.get(scraper__name=project, version__endswith=label)
    spiders = {"books": "myproject.spiders.books.Books", "toscrape-css": "myproject.spiders.toscrape-css.Css"}
    ScraperVersion.objects.filter(pk=version.pk).update(package_status=PackageStatus.READY, spiders=spiders)
    return version


def deploy(admin, label="1700000000", project="myproject"):
    answer = admin.post("/scrapyd/addversion.json", {"project": project, "version": label, "egg": egg()}).json()
    assert answer["status"] == "ok", answer
    return answer


def test_an_egg_becomes_the_projects_running_version(admin):
    answer = deploy(admin)
    assert answer == {"node_name": answer["node_name"], "status": "ok", "project": "myproject",
                      "version": "1700000000", "spiders": 2}  # fmt: skip
    version = ScraperVersion.objects.get(scraper__name="myproject")
    assert version.version == "1.0.0+scrapyd.1700000000" and version.is_default
    assert version.package.filename.endswith(".whl") and version.settings_module == "myproject.settings"
    assert version.spider == "myproject.spiders.books.Books"
    deploy(admin, label="1700000100")
    assert admin.get("/scrapyd/listversions.json", {"project": "myproject"}).json()["versions"] == [
        "1700000000",
        "1700000100",
    ]
    assert ScraperVersion.objects.get(is_default=True, scraper__name="myproject").version.endswith("1700000100")
    assert admin.get("/scrapyd/listprojects.json").json()["projects"] == ["myproject"]


def test_a_semantic_label_is_the_version_itself_and_a_label_is_not_reused(admin):
    deploy(admin, label="2.1.0")
    assert ScraperVersion.objects.get(scraper__name="myproject").version == "2.1.0"
    again = admin.post("/scrapyd/addversion.json", {"project": "myproject", "version": "2.1.0", "egg": egg()}).json()
    assert again["status"] == "error" and "already has a version '2.1.0'" in again["message"]


def test_an_upload_that_is_not_an_egg_or_has_no_spider_is_refused_and_nothing_is_written(admin):
    junk = io.BytesIO(b"not a zip")
    junk.name = "project.egg"
    answer = admin.post("/scrapyd/addversion.json", {"project": "p", "version": "1", "egg": junk}).json()
    assert answer["status"] == "error" and "neither an egg nor a wheel" in answer["message"]
    spiderless = {k: v for k, v in EGG.items() if "spiders/" not in k}
    answer = admin.post("/scrapyd/addversion.json", {"project": "p", "version": "1", "egg": egg(spiderless)}).json()
    assert answer["status"] == "error" and "no scrapy.Spider subclass" in answer["message"]
    missing = admin.post("/scrapyd/addversion.json", {"project": "p", "version": "1"}).json()
    assert missing["message"] == "'egg' file is required"
    assert not ScraperVersion.objects.filter(scraper__name="p").exists()


def test_deploying_and_deleting_need_an_admin_token_and_every_call_needs_a_valid_one(alice):
    for path in ("addversion", "delversion", "delproject"):
        answer = alice.post(f"/scrapyd/{path}.json", {"project": "myproject", "version": "1"})
        assert answer.status_code == 403 and answer.json()["status"] == "error"
    _, token = token_issue(requester_name="bob")
    for credentials in (f"alice:{token}", "alice:wrong", "nobody:"):
        auth = base64.b64encode(credentials.encode()).decode()
        answer = Client(HTTP_AUTHORIZATION=f"Basic {auth}").get("/scrapyd/daemonstatus.json")
        assert answer.status_code == 401 and answer["WWW-Authenticate"].startswith("Basic")
    assert Client().get("/scrapyd/listjobs.json").status_code == 401
    assert alice.get("/scrapyd/schedule.json").status_code == 405


def test_schedule_runs_a_spider_by_name_with_arguments_settings_priority_and_version(admin, alice):
    deploy(admin)
    built()
    answer = alice.post(
        "/scrapyd/schedule.json",
        {"project": "myproject", "spider": "books", "_version": "1700000000", "priority": "3",
         "setting": ["USER_AGENT=bot/1.0", "DEPTH_LIMIT=2", "CLOSESPIDER_PAGECOUNT=40", "CLOSESPIDER_ITEMCOUNT=0"],
         "category": "poetry", "pages": "2"},
    ).json()  # fmt: skip
    assert answer["status"] == "ok", answer
    job = CrawlJob.objects.get(pk=answer["jobid"])
    assert job.spider == "books" and job.scraper.name == "myproject" and job.requester.name == "alice"
    assert job.args == {"category": "poetry", "pages": "2"}
    assert job.options == {"useragent": "bot/1.0", "maxdepth": 2, "max_pages": 40}  # an item count of 0: no limit
    assert job.priority == 53 and job.requested_version == "1.0.0+scrapyd.1700000000"


@pytest.mark.parametrize(
    "params, message",
    [
        ({"spider": "books"}, "'project' parameter is required"),
        ({"project": "myproject", "spider": "nope"}, "nope"),
        ({"project": "myproject", "spider": "books", "_version": "9"}, "has no version '9'"),
        ({"project": "myproject", "spider": "books", "setting": "ROBOTSTXT_OBEY=False"}, "may not set ROBOTSTXT_OBEY"),
        ({"project": "myproject", "spider": "books", "priority": "high"}, "priority must be a number"),
        ({"project": "myproject", "spider": "books", "setting": "CLOSESPIDER_PAGECOUNT=-1"}, "max_pages"),
    ],
)
def test_schedule_refuses_with_scrapyds_error_shape(admin, alice, params, message):
    deploy(admin)
    built()
    answer = alice.post("/scrapyd/schedule.json", params)
    assert answer.status_code == 200 and answer.json()["status"] == "error"
    assert message in answer.json()["message"]
    assert not CrawlJob.objects.exists()


def test_jobs_are_listed_by_scrapyd_state_and_only_to_their_requester(admin, alice):
    deploy(admin)
    built()
    ids = [
        alice.post("/scrapyd/schedule.json", {"project": "myproject", "spider": "books"}).json()["jobid"]
        for _ in range(3)
    ]
    CrawlJob.objects.filter(pk=ids[1]).update(status=JobStatus.RUNNING)
    CrawlJob.objects.filter(pk=ids[2]).update(status=JobStatus.SUCCEEDED)
    jobs = alice.get("/scrapyd/listjobs.json", {"project": "myproject"}).json()
    assert [j["id"] for j in jobs["pending"]] == [ids[0]] and jobs["pending"][0]["spider"] == "books"
    assert jobs["running"][0]["log_url"] == f"http://testserver/api/jobs/{ids[1]}/log/"
    finished = jobs["finished"][0]
    assert finished["items_url"] == f"http://testserver/api/jobs/{ids[2]}/items/" and finished["outcome"] == "succeeded"
    assert {"start_time", "end_time", "version"} <= set(finished)
    status = alice.get("/scrapyd/daemonstatus.json").json()
    assert (status["pending"], status["running"], status["finished"]) == (1, 1, 1)
    assert alice.get("/scrapyd/status.json", {"job": ids[1]}).json()["currstate"] == "running"

    bob = client("bob")
    assert bob.get("/scrapyd/listjobs.json").json() | {"node_name": ""} == {
        "node_name": "", "status": "ok", "pending": [], "running": [], "finished": []}  # fmt: skip
    assert bob.get("/scrapyd/status.json", {"job": ids[1]}).json()["currstate"] == "unknown"
    assert bob.post("/scrapyd/cancel.json", {"project": "myproject", "job": ids[0]}).json()["prevstate"] is None
    assert CrawlJob.objects.get(pk=ids[0]).status == JobStatus.QUEUED

    assert alice.post("/scrapyd/cancel.json", {"project": "myproject", "job": ids[0]}).json()["prevstate"] == "pending"
    assert CrawlJob.objects.get(pk=ids[0]).status == JobStatus.CANCELLED
    assert alice.post("/scrapyd/cancel.json", {"project": "myproject", "job": ids[2]}).json()["prevstate"] == "finished"
    assert len(admin.get("/scrapyd/listjobs.json").json()["finished"]) == 2  # an admin sees every job


def test_listspiders_answers_the_running_versions_spiders_once_built(admin, alice):
    deploy(admin)
    assert alice.get("/scrapyd/listspiders.json", {"project": "myproject"}).json()["spiders"] == []
    built()
    assert alice.get("/scrapyd/listspiders.json", {"project": "myproject"}).json()["spiders"] == [
        "books",
        "toscrape-css",
    ]
    missing = alice.get("/scrapyd/listspiders.json", {"project": "nope"}).json()
    assert missing["status"] == "error" and missing["message"] == "project 'nope' not found"


def test_delversion_hands_over_to_the_newest_left_and_delproject_retires_them_all(admin):
    deploy(admin, label="1700000000")
    deploy(admin, label="1700000100")
    assert (
        admin.post("/scrapyd/delversion.json", {"project": "myproject", "version": "1700000100"}).json()["status"]
        == "ok"
    )
    assert admin.get("/scrapyd/listversions.json", {"project": "myproject"}).json()["versions"] == ["1700000000"]
    assert ScraperVersion.objects.get(is_default=True, scraper__name="myproject").version.endswith("1700000000")
    assert admin.post("/scrapyd/delproject.json", {"project": "myproject"}).json()["status"] == "ok"
    assert admin.get("/scrapyd/listprojects.json").json()["projects"] == []
    assert not ScraperVersion.objects.filter(deprecated_at__isnull=True, scraper__name="myproject").exists()


def test_scrapyds_own_port_serves_the_api_at_its_root(monkeypatch):
    import project.wsgi_scrapyd as scrapyd_port

    served = []
    monkeypatch.setattr(scrapyd_port, "trawl", lambda environ, start_response: served.append(environ["PATH_INFO"]))
    for path in ("/daemonstatus.json", "/scrapyd/listjobs.json", ""):
        scrapyd_port.application({"PATH_INFO": path}, None)
    assert served == ["/scrapyd/daemonstatus.json", "/scrapyd/listjobs.json", "/scrapyd/"]


def test_scrapyd_clients_double_slash_reaches_the_same_endpoint(alice):
    """scrapyd-client appends `/listjobs.json` to scrapy.cfg's `url = .../scrapyd/` (scrapyd-deploy joins it)."""
    assert alice.get("/scrapyd//listjobs.json").json()["status"] == "ok"


def test_a_wheel_is_accepted_too_its_settings_module_from_its_scrapy_entry_point(admin, tmp_path):
    from tests.packages import wheel_build

    files = {k: v for k, v in EGG.items() if not k.startswith("EGG-INFO/")}
    files["myproject-2.0.dist-info/entry_points.txt"] = "[scrapy]\nsettings = myproject.settings\n"
    wheel = wheel_build(tmp_path, name="myproject", version="2.0", files=files)
    with wheel.open("rb") as package:
        answer = admin.post("/scrapyd/addversion.json", {"project": "shop", "version": "r7-g1a2b", "egg": package})
    assert answer.json()["status"] == "ok" and answer.json()["version"] == "r7-g1a2b"
    version = ScraperVersion.objects.get(scraper__name="shop")
    assert (version.version, version.settings_module) == ("1.0.0+scrapyd.r7-g1a2b", "myproject.settings")
    assert version.package.filename == wheel.name


def test_an_egg_that_is_a_zip_bomb_or_needs_a_direct_url_is_refused_and_nothing_is_written(admin):
    """An egg is extracted and converted in the web process: past the zip bounds it is refused unread; one whose
    requires.txt names a direct URL (which pip would build from source on a worker) is refused naming it."""
    bomb = egg({**EGG, "myproject/data.bin": "\0" * (20 * 1024 * 1024)}, compression=zipfile.ZIP_DEFLATED)
    answer = admin.post("/scrapyd/addversion.json", {"project": "p", "version": "1", "egg": bomb}).json()
    assert answer["status"] == "error" and "compressed over 200 to one" in answer["message"], answer

    direct = egg({**EGG, "EGG-INFO/requires.txt": "trawlevil@ file:///tmp/evilsrc\n"})
    answer = admin.post("/scrapyd/addversion.json", {"project": "p", "version": "1", "egg": direct}).json()
    assert answer["status"] == "error" and "direct URL reference" in answer["message"], answer
    assert not ScraperVersion.objects.filter(scraper__name="p").exists()


def test_scrapydwebs_run_form_as_it_comes_schedules_a_bounded_job(admin, alice):
    """ScrapydWeb's "Run Spider" form sends its `additional` box as it is unless cleared:
    `-d setting=CLOSESPIDER_TIMEOUT=60 -d setting=CLOSESPIDER_PAGECOUNT=10 -d arg1=val1`, and a jobid."""
    deploy(admin)
    built()
    answer = alice.post(
        "/scrapyd/schedule.json",
        {"project": "myproject", "spider": "books", "jobid": "2026-12-01T03_30_00", "arg1": "val1",
         "setting": ["CLOSESPIDER_PAGECOUNT=10", "CLOSESPIDER_TIMEOUT=60"]},
    ).json()  # fmt: skip
    assert answer["status"] == "ok", answer
    job = CrawlJob.objects.get(pk=answer["jobid"])
    assert job.options == {"max_pages": 10, "max_seconds": 60.0} and job.args == {"arg1": "val1"}


def port_get(path: str, query: str = "", *, auth: str = "") -> tuple[str, bytes]:
    """A GET through scrapyd's own port's WSGI callable (project.wsgi_scrapyd), as gunicorn calls it."""
    from wsgiref.util import setup_testing_defaults

    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    import project.wsgi_scrapyd as scrapyd_port

    environ = {"PATH_INFO": path, "QUERY_STRING": query, "HTTP_HOST": "testserver"}
    if auth:
        environ["HTTP_AUTHORIZATION"] = auth
    setup_testing_defaults(environ)
    answered = []
    # As Django's test client does: the test's transaction outlives the request.
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    try:
        body = b"".join(scrapyd_port.application(environ, lambda status, headers: answered.append(status)))
    finally:
        for signal in (request_started, request_finished):
            signal.connect(close_old_connections)
    return answered[0], body


def basic(name: str) -> str:
    _, token = token_issue(requester_name=name)
    return "Basic " + base64.b64encode(f"{name}:{token}".encode()).decode()


def test_listjobs_links_on_scrapyds_own_port_answer_there(admin):
    """`make run` serves scrapyd at the root of port 6800 (project.wsgi_scrapyd): the `log_url` and `items_url` that
    listjobs.json gives there point at that port, so they must answer there too, not as /scrapyd/api/... (a 404)."""
    auth = basic("alice")
    get = partial(port_get, auth=auth)
    deploy(admin)
    built()
    job_id = client("alice").post("/scrapyd/schedule.json", {"project": "myproject", "spider": "books"}).json()["jobid"]
    CrawlJob.objects.filter(pk=job_id).update(status=JobStatus.SUCCEEDED)
    status, body = get("/listjobs.json", "project=myproject")
    finished = json.loads(body)["finished"][0]
    for link in (finished["log_url"], finished["items_url"]):
        assert link.startswith("http://testserver/api/jobs/"), link
        status, body = get(link.removeprefix("http://testserver"))
        assert status.startswith("200"), (link, status, body[:300])
    assert json.loads(body)["count"] == 0  # the items page, the job's own (none stored)
    assert get("/api/jobs/")[0].startswith("404")  # the rest of Trawl's API stays on Trawl's own port


def test_scrapyds_home_page_answers_at_the_root_as_scrapydweb_checks_it(admin):
    """ScrapydWeb refuses to start unless `GET http://host:port` (with its basic auth) answers 200."""
    deploy(admin)
    status, body = port_get("/", auth=basic("alice"))
    assert status.startswith("200") and b"Available projects: <b>myproject</b>" in body, (status, body[:300])
    assert b'href="jobs"' in body
    assert port_get("")[0].startswith("401"), "the home page asks for the same credentials"
    assert client("bob").get("/scrapyd/").status_code == 200  # under Trawl's own port too
