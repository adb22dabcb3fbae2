"""A local S3 server (moto's, in a thread of this process, on a free port of 127.0.0.1: never the internet)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def moto_bucket(bucket: str) -> Iterator[tuple[str, Any]]:
    """(endpoint URL, a boto3 S3 client of it) with `bucket` created empty; the server stops at the end. Its keys:
    `testing`/`testing`, region us-east-1."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket=bucket)
        yield endpoint, client
    finally:
        server.stop()
