"""Attack: a requester's rendered page makes the browser do what its crawl may not — its scripts fetch a private
address, frame it, reach it through a redirect from the attacker's own site, open it in a popup, and ask for a
worker-local `file://` URL and a web socket — under the production settings (the guard on). Nothing private is
fetched: the private site's request log stays empty, no item or log line carries its content, and the job counts the
refused sub-requests (`render.subrequests_blocked`). The page itself still renders and yields its item.
"""

from __future__ import annotations

import pytest

from tests.security.conftest import ATTACKER_HOST
from tests.security.hostile_site import HostileSite, exposed, redirect, submit, wait_final
from tests.sites import LocalSite

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MARKER = "TRAWL-PRIVATE-RENDER-91c4"  # only on the private site and in the worker-local file


@pytest.fixture
def mode() -> str:
    """Production only: under `make run` the guard is off by design (docs/trust.md)."""
    return "production"


@pytest.fixture
def private_site(tmp_path):
    """Stands for the internal network (127.0.0.1, not allow-listed): every page holds the marker."""
    root = tmp_path / "private"
    root.mkdir()
    for name in ("xhr", "frame", "redirected", "popup", "image"):
        (root / name).write_text(f"<html><title>{MARKER}</title>{MARKER}</html>")
    with LocalSite(root) as site:
        yield site


def attack_page(private: str, local_file: str) -> str:
    return f"""<html><head><title>attack</title></head><body><div id="out">start</div><script>
const out = document.getElementById("out");
const show = (text) => {{ out.textContent += " " + text; document.title = out.textContent; }};
fetch("{private}/xhr").then((r) => r.text()).then(show, () => show("xhr-refused"));
fetch("/go").then((r) => r.text()).then(show, () => show("redirect-refused"));
fetch("{local_file}").then((r) => r.text()).then(show, () => show("file-refused"));
const frame = document.createElement("iframe"); frame.src = "{private}/frame"; document.body.appendChild(frame);
const socket = new WebSocket("ws://{ATTACKER_HOST}:1/"); socket.onerror = () => show("socket-refused");
window.open("{private}/popup");
</script></body></html>"""


@pytest.mark.usefixtures("mode_web_settings")
def test_a_rendered_pages_requests_to_private_addresses_and_files_are_refused(
    api, builtins, mode_worker, private_site, tmp_path
):
    secret = tmp_path / "secret.html"
    secret.write_text(MARKER)
    routes = {
        "/": (200, {}, attack_page(private_site.url, f"file://{secret}")),
        "/go": redirect(f"{private_site.url}/redirected"),
    }
    with HostileSite(routes) as attacker:
        spec = {"render": True, "wait_for": "networkidle"}
        job = wait_final(submit(api, url=f"{attacker.url}/", options=spec), mode_worker)

    assert job.status == "succeeded", job.error_message
    assert sum(private_site.hits.values()) == 0, dict(private_site.hits)
    assert attacker.hits["/go"] == 1  # the redirect was fetched; where it led was not
    assert job.stats["render"]["pages"] == 1 and job.stats["items"] == 1
    # The private fetch, the frame, the redirect's target, the popup and the web socket (Chromium itself refuses a
    # web page's file:// request before it is routed).
    assert job.stats["render"]["subrequests_blocked"] >= 5, job.stats["render"]
    assert MARKER not in exposed(api, str(job.pk))
    print(f"rendered page: {job.stats['render']}")
