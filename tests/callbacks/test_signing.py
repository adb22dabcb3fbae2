"""`X-Trawl-Signature`: what a receiver recomputes, and what it must refuse."""

from __future__ import annotations

import hashlib
import hmac

from callbacks.signing import signature_header, signature_verify

SECRET = "s3cret"
BODY = b'{"event":"job.completed","id":"e1"}'


def test_header_is_hmac_sha256_of_timestamp_dot_body():
    header = signature_header(secret=SECRET, body=BODY, timestamp=1_700_000_000)

    expected = hmac.new(SECRET.encode(), b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"


def test_receiver_accepts_an_untouched_request():
    header = signature_header(secret=SECRET, body=BODY)

    assert signature_verify(secret=SECRET, body=BODY, header=header)


def test_receiver_refuses_a_changed_body_a_wrong_secret_or_a_garbled_header():
    header = signature_header(secret=SECRET, body=BODY)

    assert not signature_verify(secret=SECRET, body=BODY.replace(b"e1", b"e2"), header=header)
    assert not signature_verify(secret="other", body=BODY, header=header)
    assert not signature_verify(secret=SECRET, body=BODY, header="v1=abc")
    assert not signature_verify(secret=SECRET, body=BODY, header="t=soon,v1=abc")


def test_receiver_refuses_a_replay_outside_the_tolerance():
    header = signature_header(secret=SECRET, body=BODY, timestamp=1_700_000_000)

    assert signature_verify(secret=SECRET, body=BODY, header=header, now=1_700_000_000 + 299)
    assert not signature_verify(secret=SECRET, body=BODY, header=header, now=1_700_000_000 + 301)


def test_a_changed_timestamp_breaks_the_signature():
    header = signature_header(secret=SECRET, body=BODY, timestamp=1_700_000_000)
    forged = header.replace("t=1700000000", "t=1700000100")

    assert not signature_verify(secret=SECRET, body=BODY, header=forged, now=1_700_000_100)
