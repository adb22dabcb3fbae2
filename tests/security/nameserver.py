"""Helpers for the DNS attacks: a real UDP DNS server whose answers the test scripts (a name that answers an allowed
address first and a private one after: rebinding), HTTP listeners on chosen addresses that record what reaches
them, and a worker pointed at the DNS server through TRAWL_DNS_SERVERS."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.callbacks.harness import FAST_ENV, running_alone
from tests.security.conftest import ATTACKER_HOST, MODES
from tests.workers import Worker

PRIVATE_HOST = "127.0.0.1"


class NameServer:
    """Answers A queries for scripted names: the first `allowed_times` queries of a name get `first`, later ones
    `then`. AAAA queries of a scripted name get no record; other names are NXDOMAIN. Counts A queries per name."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((PRIVATE_HOST, 0))
        self.sock.settimeout(0.2)
        self.script: dict[str, tuple[str, str, int]] = {}
        self.queries: Counter = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def address(self) -> str:
        return f"{PRIVATE_HOST}:{self.sock.getsockname()[1]}"

    def rebinding(self, name: str, *, first: str, then: str, allowed_times: int = 1) -> None:
        self.script[name.lower().rstrip(".")] = (first, then, allowed_times)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(4096)
            except (TimeoutError, OSError):
                continue
            try:
                self.sock.sendto(self._answer(dns.message.from_wire(data)).to_wire(), peer)
            except Exception:  # a malformed query gets no answer, as from a real server under load
                continue

    def _answer(self, query: dns.message.Message) -> dns.message.Message:
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        for question in query.question:
            name = question.name.to_text().lower().rstrip(".")
            if name not in self.script:
                response.set_rcode(dns.rcode.NXDOMAIN)
                continue
            if question.rdtype != dns.rdatatype.A:
                continue
            first, then, allowed_times = self.script[name]
            self.queries[name] += 1
            address = first if self.queries[name] <= allowed_times else then
            response.answer.append(dns.rrset.from_text(question.name, 0, "IN", "A", address))
        return response

    def __enter__(self) -> NameServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


class Listener:
    """An HTTP server on (host, port) that records every request's path (and POST body) and serves `pages`; with
    `tls` (certificate and key files) an https one that also records the name each handshake asked for (SNI)."""

    def __init__(
        self, host: str, port: int = 0, *, pages: dict[str, str] | None = None, tls: tuple[str, str] | None = None
    ) -> None:
        self.hits: list[tuple[str, str, bytes]] = []
        self.server_names: list[str | None] = []
        pages = pages or {}
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else b""
                listener.hits.append((method, self.path, body))
                content = pages.get(self.path, "<html><title>ok</title></html>").encode()
                self.send_response(200 if self.path in pages or method == "POST" else 404)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def do_GET(self):
                self._record("GET")

            def do_POST(self):
                self._record("POST")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            context.sni_callback = lambda _sock, name, _context: self.server_names.append(name)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def paths(self) -> list[str]:
        return [path for _, path, _ in self.hits]

    def __enter__(self) -> Listener:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def twin_listeners(
    pages: dict[str, str] | None = None, *, tls: tuple[str, str] | None = None
) -> tuple[Listener, Listener]:
    """A private listener on 127.0.0.1 and an allowed one on 127.0.0.2, on the same port: a name's answer alone
    decides which one a request reaches."""
    for _ in range(20):
        private = Listener(PRIVATE_HOST, pages=pages, tls=tls)
        try:
            return private, Listener(ATTACKER_HOST, private.port, pages=pages, tls=tls)
        except OSError:
            private.server.server_close()
    raise RuntimeError("no port free on both 127.0.0.1 and 127.0.0.2")


@pytest.fixture
def nameserver():
    with NameServer() as server:
        yield server


@pytest.fixture
def dns_mode_worker(mode, mode_web_settings, nameserver, django_db_setup, django_db_blocker, redis_server, tmp_path):
    """Like the shared `mode_worker`, with crawls and webhooks resolving through `nameserver` (the web side too)."""
    mode_web_settings.TRAWL_DNS_SERVERS = [nameserver.address]
    env = {**MODES[mode], **FAST_ENV, "TRAWL_DNS_SERVERS": nameserver.address}
    worker = Worker(queues="crawls,control,callbacks", concurrency=1, env=env, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


def wait_for(predicate, worker, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never happened\n{worker.log_tail()}")
        time.sleep(0.3)


def self_signed(tmp_path, name: str) -> tuple[str, str]:
    """A self-signed certificate for `name` (and its key): files for `Listener(tls=...)` and for SSL_CERT_FILE."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_path), str(key_path)
