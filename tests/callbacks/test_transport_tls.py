"""An https webhook connects to the address its check resolved, and still speaks TLS to the host name: SNI carries
the name and the certificate is verified against it. A real TLS receiver on 127.0.0.2, a name from a real DNS
server (TRAWL_DNS_SERVERS), and a self-signed certificate the test makes the client trust (SSL_CERT_FILE)."""

from __future__ import annotations

import ssl
from http.server import BaseHTTPRequestHandler

import pytest

from callbacks.transport import post_signed
from tests.security.nameserver import NameServer, self_signed
from tests.sites import ServedSite


class TLSReceiver(ServedSite):
    """An https server on 127.0.0.2 that records the SNI of every handshake and the path of every POST."""

    def __init__(self, cert: str, key: str) -> None:
        self.server_names: list[str | None] = []
        self.posts: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.posts.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        context.sni_callback = lambda _sock, name, _ctx: self.server_names.append(name)
        super().__init__(Handler, host="127.0.0.2")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)


@pytest.fixture
def hook_name(settings):
    with NameServer() as server:
        server.rebinding("hook.test", first="127.0.0.2", then="127.0.0.1", allowed_times=1)
        settings.TRAWL_DNS_SERVERS = [server.address]
        settings.TRAWL_BLOCK_PRIVATE_TARGETS = True
        settings.TRAWL_PRIVATE_TARGETS_ALLOWED = ["127.0.0.2/32"]
        yield server


def test_https_webhooks_connect_to_the_checked_address_with_sni_and_verification(hook_name, tmp_path, monkeypatch):
    cert, key = self_signed(tmp_path, "hook.test")
    monkeypatch.setenv("SSL_CERT_FILE", cert)  # trust the receiver's certificate, and only it
    with TLSReceiver(cert, key) as receiver:
        result = post_signed(url=f"https://hook.test:{receiver.port}/h", payload={}, headers={}, secret="s", timeout=5)

    assert result.ok, result.error
    assert receiver.server_names == ["hook.test"] and receiver.posts == ["/h"]
    assert hook_name.queries["hook.test"] == 1  # one resolution: the one that was checked


def test_a_certificate_for_another_name_fails_the_delivery(hook_name, tmp_path, monkeypatch):
    cert, key = self_signed(tmp_path, "other.test")
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    with TLSReceiver(cert, key) as receiver:
        result = post_signed(url=f"https://hook.test:{receiver.port}/h", payload={}, headers={}, secret="s", timeout=5)

    assert not result.ok and "CERTIFICATE_VERIFY_FAILED" in result.error, result.error
    assert receiver.server_names == ["hook.test"] and receiver.posts == []
