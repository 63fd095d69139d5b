"""Headless Chromium for the web page's tests (architecture §8): Debian's ``chromium`` driven by
its ``chromium-driver`` through selenium, on a fresh profile, with no network of its own.

:func:`browser_or_skip` is the reason to skip when either is not installed (``.ci/run``
installs both); :func:`headless_chromium` starts one for the length of a block. Selenium is
blocking: tests call it from a worker thread (``anyio.to_thread.run_sync``) while the daemon
runs on the event loop.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["ARTIFACTS", "CHROMIUM_FLAGS", "browser_missing", "headless_chromium"]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1100,800",
)
"""No sandbox (CI runs as root), nothing fetched on its own (the machine has no internet)."""

ARTIFACTS = Path(os.environ.get("RELAYBOT_TEST_ARTIFACTS") or tempfile.gettempdir()) / (
    "relaybot-test-artifacts"
)
"""Where screenshots go: ``$RELAYBOT_TEST_ARTIFACTS``, else the system's temporary directory
(never the checkout)."""


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not shutil.which(path):
            return f"{path} is missing (apt-get install {package}; .ci/run installs it)"
    return None


@contextmanager
def headless_chromium() -> Iterator[Any]:
    """A selenium ``WebDriver`` of headless Chromium on a fresh profile, quit at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="relaybot-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        try:
            yield driver
        finally:
            driver.quit()
