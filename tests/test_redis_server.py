"""The Redis `make run` starts when none answers: with a data directory it keeps its data across a restart."""

from __future__ import annotations

import socket

import redis

from project.redis.server import redis_start_if_absent


def free_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{probe.getsockname()[1]}/0"


def stop(server) -> None:
    server.terminate()  # SIGTERM: Redis flushes its append-only file and exits
    server.wait(10)


def test_an_embedded_redis_with_a_data_dir_keeps_a_frontier_across_a_restart(tmp_path):
    url, data = free_url(), tmp_path / "redis"
    server = redis_start_if_absent(url, log_path=str(tmp_path / "redis.log"), data_dir=str(data))
    try:
        redis.Redis.from_url(url).zadd("trawl:frontier:job:queue", {b"request": 0})
    finally:
        stop(server)
    assert (data / "appendonly.aof").exists()

    server = redis_start_if_absent(url, log_path=str(tmp_path / "redis.log"), data_dir=str(data))
    try:
        assert redis.Redis.from_url(url).zrange("trawl:frontier:job:queue", 0, -1) == [b"request"]
    finally:
        stop(server)


def test_without_a_data_dir_nothing_is_kept(tmp_path):
    url = free_url()
    server = redis_start_if_absent(url, log_path=str(tmp_path / "redis.log"))
    try:
        redis.Redis.from_url(url).set("kept", "1")
    finally:
        stop(server)
    server = redis_start_if_absent(url, log_path=str(tmp_path / "redis.log"))
    try:
        assert redis.Redis.from_url(url).get("kept") is None
    finally:
        stop(server)
