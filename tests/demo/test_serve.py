"""Serving the demo shop: on a real socket, generated on demand, stopped cleanly by Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request

from demo.generate import generate_site
from demo.serve import DemoServer, site_ensure
from tests.workers import BASE_DIR


def fetch(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


def test_server_serves_the_generated_shop(tmp_path):
    with DemoServer(tmp_path) as server:
        generate_site(tmp_path, server.url, categories=1, products_per_category=2)
        status, body = fetch(f"{server.url}/")
        robots = fetch(f"{server.url}/robots.txt")[1]

    assert status == 200 and 'class="category"' in body
    assert f"Sitemap: {server.url}/sitemap.xml" in robots


def test_site_is_regenerated_only_when_missing_or_for_another_address(tmp_path):
    assert site_ensure(tmp_path, "http://127.0.0.1:9001") is True
    assert site_ensure(tmp_path, "http://127.0.0.1:9001/") is False
    assert site_ensure(tmp_path, "http://127.0.0.1:9002") is True
    assert "127.0.0.1:9002/product/" in (tmp_path / "sitemap.xml").read_text()


def test_cli_generates_serves_and_exits_cleanly_on_ctrl_c(tmp_path):
    command = [sys.executable, "-m", "demo.serve", "--port", "0", "--dir", str(tmp_path / "site")]
    process = subprocess.Popen(command, cwd=BASE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = process.stdout.readline()
        url = banner.split(" at ", 1)[1].split("/ ", 1)[0]
        status, body = fetch(f"{url}/index.html")
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()

    assert status == 200 and "Categories" in body
    assert process.returncode == 0
    assert errors == "", "no traceback or request log on a clean exit"
