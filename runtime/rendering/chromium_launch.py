#!/usr/bin/env python3
"""Starts Chromium for a crawl worker so that it dies with its parent (Playwright's driver, itself tied to the worker
by its stdin pipe): a SIGKILLed worker leaves no browser behind. Playwright runs this file as the browser executable;
it asks the kernel for SIGKILL when the parent dies (PR_SET_PDEATHSIG survives exec), checks that the parent did not
die already, and becomes the Chromium named in TRAWL_CHROMIUM_BINARY with the arguments Playwright passed.

Standard library only: the interpreter may be any Python 3 on the machine, not the worker's virtualenv."""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main() -> None:
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_PDEATHSIG) failed: errno {ctypes.get_errno()}")
    if os.getppid() != parent:  # the parent died before the request took effect
        sys.exit("the parent exited before the browser started")
    binary = os.environ.get("TRAWL_CHROMIUM_BINARY") or "/usr/bin/chromium"
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
