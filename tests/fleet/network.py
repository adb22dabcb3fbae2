"""Hosts of a fleet test: each a network namespace of its own with an address on a bridge, its own host name (a UTS
namespace per process it starts), and a link that can be cut. Everything stays on this machine.

The shared services listen on the bridge's address in the root namespace; a host reaches them, and the test reaches
a host, through the bridge. Names carry a suffix of this test process, so two runs on one machine never collide.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time

SUFFIX = f"{os.getpid() % 10000:04d}"
# A /24 of its own per test process (10.231.N.0/24), so parallel runs do not share a subnet.
SUBNET = f"10.231.{os.getpid() % 250 + 1}"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def netns_unavailable() -> str:
    """Why network namespaces cannot be made here ("" when they can): not root, or no `ip`/`unshare`."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    probe = f"trawl-probe-{SUFFIX}"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return ""


class Bridge:
    """The fleet's network: a bridge in the root namespace at `<SUBNET>.1`, where the shared services listen."""

    def __init__(self) -> None:
        self.name = f"tfbr{SUFFIX}"
        self.address = f"{SUBNET}.1"

    def create(self) -> Bridge:
        ip("link", "add", self.name, "type", "bridge")
        ip("addr", "add", f"{self.address}/24", "dev", self.name)
        ip("link", "set", self.name, "up")
        return self

    def destroy(self) -> None:
        ip("link", "del", self.name, check=False)


class Host:
    """One host: a namespace, its end of a veth pair on the bridge, an address, a host name."""

    def __init__(self, bridge: Bridge, letter: str, number: int) -> None:
        self.bridge = bridge
        self.letter = letter
        self.hostname = f"fleet-{letter}"
        self.namespace = f"trawl-fleet-{SUFFIX}-{letter}"
        self.link = f"tf{SUFFIX}{letter}"  # the root end (interface names are at most 15 characters)
        self.address = f"{SUBNET}.{10 + number}"

    def create(self) -> Host:
        inside = f"{self.link}i"
        ip("netns", "add", self.namespace)
        ip("link", "add", self.link, "type", "veth", "peer", "name", inside)
        ip("link", "set", inside, "netns", self.namespace)
        ip("link", "set", self.link, "master", self.bridge.name)
        ip("link", "set", self.link, "up")
        ip("-n", self.namespace, "link", "set", "lo", "up")
        ip("-n", self.namespace, "link", "set", inside, "name", "eth0")
        ip("-n", self.namespace, "addr", "add", f"{self.address}/24", "dev", "eth0")
        ip("-n", self.namespace, "link", "set", "eth0", "up")
        ip("-n", self.namespace, "route", "add", "default", "via", self.bridge.address)
        return self

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside this host: its namespace, and a UTS namespace named after the host (Celery's `%h`, the
        egress label's default and the worker presence all read the host name)."""
        set_name = 'hostname "$HOSTNAME_WANTED" && exec "$@"'
        return ["ip", "netns", "exec", self.namespace, "unshare", "--uts", "--", "sh", "-c", set_name, "sh", *argv]

    def cut(self) -> None:
        ip("link", "set", self.link, "down")

    def restore(self) -> None:
        ip("link", "set", self.link, "up")

    def pids(self) -> list[int]:
        listed = ip("netns", "pids", self.namespace, check=False).stdout.split()
        return [int(pid) for pid in listed if pid.isdigit()]

    def kill_everything(self) -> None:
        """SIGKILL every process of the host at once, as a power cut would."""
        for _ in range(3):  # a dying pool parent may fork a replacement in between
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)

    def destroy(self) -> None:
        self.kill_everything()
        ip("netns", "del", self.namespace, check=False)
        ip("link", "del", self.link, check=False)
