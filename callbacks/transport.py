"""One signed webhook POST and what came of it. Never raises for anything the network or receiver does.

The receiver's host is resolved once per attempt (TRAWL_DNS_SERVERS or the system resolver) and, with
TRAWL_BLOCK_PRIVATE_TARGETS on, every answer is judged (public or TRAWL_PRIVATE_TARGETS_ALLOWED); the POST then
connects to one of those checked addresses, never to a second lookup's answer (DNS rebinding). For https the TLS
handshake still names the host (SNI) and the certificate is verified against the host name. Redirects are not
followed, and webhooks do not go through environment proxies.

`timeout` bounds the connect and each socket read; `deadline` bounds the whole POST from the connect to the last
byte of the answer. A receiver dripping one byte every few seconds never trips a per-read timeout: at the deadline a
timer shuts the socket down under the blocked read, so one delivery holds a callbacks process for `deadline` at most.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from callbacks.payloads import body_bytes
from callbacks.signing import signature_header
from project.net import allowed_networks, guard_enabled, resolve_checked

USER_AGENT = "Trawl-Webhooks/0.1"
SNIPPET_BYTES = 300


@dataclass(frozen=True)
class PostResult:
    status_code: int | None
    error: str
    duration_ms: int

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def post_signed(
    *, url: str, payload: dict, headers: dict[str, str], secret: str, timeout: float, deadline: float | None = None
) -> PostResult:
    """POST `payload` signed with `secret`. `deadline` (default TRAWL_WEBHOOK_DEADLINE_SECONDS) bounds the whole
    exchange after the name is resolved: connect, send and the complete answer."""
    deadline = settings.TRAWL_WEBHOOK_DEADLINE_SECONDS if deadline is None else deadline
    body = body_bytes(payload)
    all_headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers}
    if secret:
        # Signed at send time: the timestamp is this attempt's, so receivers can refuse stale replays.
        all_headers["X-Trawl-Signature"] = signature_header(secret=secret, body=body)
    started = time.monotonic()
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return PostResult(status_code=None, error=f"ValueError: {exc}", duration_ms=0)
    # Resolved and checked at every attempt, not only at submission: a name may have been pointed elsewhere since.
    guarded = guard_enabled()
    resolution = resolve_checked(parts.hostname or "", allowed=allowed_networks() if guarded else ())
    if guarded and resolution.reason:
        return PostResult(status_code=None, error=f"refused: {resolution.reason}", duration_ms=0)
    if not resolution.addresses:
        return PostResult(status_code=None, error=f"DNSLookupError: {resolution.reason}", duration_ms=0)
    target = f"{parts.path or '/'}{'?' + parts.query if parts.query else ''}"
    clock = Deadline(deadline)
    status_code, error = _post(parts, port, resolution.addresses, target, body, all_headers, timeout, clock)
    duration_ms = int((time.monotonic() - started) * 1000)
    return PostResult(status_code=status_code, error=error, duration_ms=duration_ms)


class Deadline:
    """The end of one POST: what is left of it, and a timer that shuts the connection down when it passes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends_at = time.monotonic() + seconds
        self.passed = threading.Event()
        self._lock = threading.Lock()
        self._done = False
        self._timer: threading.Timer | None = None

    def left(self) -> float:
        return self.ends_at - time.monotonic()

    def guard(self, sock: socket.socket) -> None:
        """Shut the connection of `sock` down at the deadline: a read or send blocked on it then fails at once. By
        descriptor: TLS wraps (and detaches) the socket object, the descriptor stays the connection's."""
        self._timer = threading.Timer(max(self.left(), 0.0), self._cut, args=(sock.fileno(),))
        self._timer.daemon = True
        self._timer.start()

    def _cut(self, fd: int) -> None:
        with self._lock:
            if self._done:
                return
            self.passed.set()
            try:
                # A duplicate of the descriptor: shutdown(2) acts on the connection every duplicate shares, and
                # closing the duplicate leaves the POST's own descriptor for the POST to close.
                with socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM) as duplicate:
                    duplicate.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed: the POST ended as the timer fired

    def cancel(self) -> None:
        """Before the connection closes: afterwards its descriptor number may belong to another socket."""
        with self._lock:
            self._done = True
        if self._timer is not None:
            self._timer.cancel()


def _post(
    parts: Any,
    port: int,
    addresses: tuple[str, ...],
    target: str,
    body: bytes,
    headers: dict,
    timeout: float,
    clock: Deadline,
) -> tuple[int | None, str]:
    connection = _connection(parts.scheme, parts.hostname or "", port, addresses, timeout, clock)
    try:
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        snippet = response.read(SNIPPET_BYTES)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if clock.passed.is_set() or clock.left() <= 0:
            return None, f"deadline: no complete answer within {clock.seconds:g}s"
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        clock.cancel()
        connection.close()
    if clock.passed.is_set():  # the timer fired as the last byte came: the answer may be cut short
        return None, f"deadline: no complete answer within {clock.seconds:g}s"
    if 200 <= response.status < 300:
        return response.status, ""
    # A redirect is a failed delivery: following it would resend a signed body to a URL nobody configured.
    return response.status, f"HTTP {response.status}: {snippet.decode(errors='replace').strip() or response.reason}"


def _connection(scheme: str, host: str, port: int, addresses: tuple[str, ...], timeout: float, clock: Deadline):
    def connect_checked(_address: Any, timeout: float = timeout, source_address: Any = None) -> socket.socket:
        sock = _first_connection(addresses, port, min(timeout, max(clock.left(), 0.001)), source_address)
        clock.guard(sock)  # before TLS: the handshake is part of the POST
        return sock

    if scheme == "https":
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
    # The socket goes to a checked address; the Host header, SNI and certificate check keep using the name.
    connection._create_connection = connect_checked  # type: ignore[attr-defined]
    return connection


def _first_connection(addresses: tuple[str, ...], port: int, timeout: float, source: Any) -> socket.socket:
    last: OSError | None = None
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout, source)
        except OSError as exc:
            last = exc
    raise last or OSError("no address to connect to")
