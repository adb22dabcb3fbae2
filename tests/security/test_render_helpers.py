"""Attacks on what a rendering worker starts, through a real production worker (guard on), an ordinary requester's
rendered job and the machine's Chromium:

- the Playwright driver and Chromium must not carry the worker's secrets in their environment (`/proc/<pid>/environ`
  is readable by every process of the worker's uid: a packaged version's child, say);
- a page's WebRTC must send no UDP (STUN/TURN) around the guard proxy: a STUN server on a local UDP socket the test
  listens on receives nothing.
"""

from __future__ import annotations

import os
import socket

import pytest

from tests.security.conftest import ATTACKER_HOST, PRODUCTION_SECRET
from tests.security.hostile_site import exposed, submit, wait_final
from tests.security.render_site import (
    CANARY_VALUE,
    SECRET_NAMES,
    RecordingSite,
    environ_of,
    render_helpers,
    render_worker,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["render_worker"]  # fixture

RENDER = {"render": True, "wait_for": "networkidle"}


@pytest.fixture
def mode() -> str:
    return "production"


def test_the_driver_and_chromium_carry_none_of_the_workers_secrets(api, builtins, render_worker):
    # The page waits on /held: the driver and Chromium run until the test has read their environment.
    page = '<html><title>held</title><body><script>fetch("/held")</script></body></html>'
    with RecordingSite({"/": (200, {}, page), "/held": (200, {}, "ok")}, held=("/held",)) as site:
        job_id = submit(api, url=f"{site.url}/", options=RENDER)
        assert site.holding.wait(180), render_worker.log_tail()
        helpers = render_helpers(render_worker)
        environs = {process.pid: (kind, environ_of(process)) for kind, found in helpers.items() for process in found}
        commands = {process.pid: process.cmdline() for process in helpers["chromium"]}
        site.release()
        job = wait_final(job_id, render_worker)

    assert job.status == "succeeded", job.error_message
    assert helpers["driver"] and helpers["chromium"], helpers
    print(f"\nread the environment of {len(environs)} processes: {sorted(kind for kind, _ in environs.values())}")
    for pid, (kind, environ) in environs.items():
        leaked = sorted(set(SECRET_NAMES) & set(environ))
        assert not leaked, f"{kind} {pid} has {leaked}"
        values = "\0".join(environ.values())
        assert PRODUCTION_SECRET not in values and CANARY_VALUE not in values, f"{kind} {pid}"
    # What they need is still there (Chromium's helpers write their title over their environment: the browser's).
    pid = next(pid for pid, command in commands.items() if not any("--type=" in a for a in command))
    browser = environs[pid][1]
    for environ in (browser, *(environs[process.pid][1] for process in helpers["driver"])):
        assert "PATH" in environ and "HOME" in environ, sorted(environ)
    assert browser.get("TRAWL_CHROMIUM_BINARY")
    # Chromium as the worker's uid allows it: sandboxed unless root (tests/runtime/test_render_sandbox.py).
    assert ("--no-sandbox" in commands[pid]) == (os.geteuid() == 0), commands[pid]
    assert "--webrtc-ip-handling-policy=disable_non_proxied_udp" in commands[pid]


WEBRTC_PAGE = """<html><head><title>webrtc</title></head><body><script>
const done = (what) => {{ document.title = what; const d = document.createElement("div"); d.id = "done";
  d.textContent = what; document.body.appendChild(d); }};
const pc = new RTCPeerConnection({{iceServers: [
  {{urls: "stun:{host}:{port}"}},
  {{urls: "turn:{host}:{port}?transport=udp", username: "u", credential: "p"}}]}});
pc.createDataChannel("out");
pc.onicegatheringstatechange = () => {{ if (pc.iceGatheringState === "complete") done("webrtc-gathered"); }};
pc.createOffer().then((offer) => pc.setLocalDescription(offer)).then(() => {{ document.title = "webrtc-offered"; }});
setTimeout(() => done(document.title + "-waited"), 8000);
</script></body></html>"""


def test_a_rendered_pages_webrtc_sends_no_udp_around_the_guard_proxy(api, builtins, render_worker):
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind((ATTACKER_HOST, 0))  # an address the guard allows: only the route around the proxy is at stake
    listener.setblocking(False)
    try:
        page = WEBRTC_PAGE.format(host=ATTACKER_HOST, port=listener.getsockname()[1])
        with RecordingSite({"/": (200, {}, page)}) as site:
            job = wait_final(
                submit(api, url=f"{site.url}/", options={"render": True, "wait_for": "#done"}), render_worker
            )
        packets = []
        while True:
            try:
                packets.append(listener.recvfrom(2048))
            except BlockingIOError:
                break
    finally:
        listener.close()

    assert job.status == "succeeded", job.error_message
    seen = exposed(api, str(job.pk))
    assert "webrtc-" in seen, "the page's WebRTC code did not run"
    print(f"\nUDP packets from the rendered page: {len(packets)}; render stats {job.stats['render']}")
    assert packets == []
