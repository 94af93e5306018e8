"""A real `claimsched web` process on a seeded database, and Debian's headless Chromium driven
by Playwright's sync API (never `playwright install`: its downloads are not needed)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from claimsched.tools.postgres import free_port
from claimsched.tools.processes import stop_process
from tests.helpers.polling import wait_for

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
# Copies of the screenshots land here too when set (for people to look at).
SCREENSHOTS = os.environ.get("CLAIMSCHED_SCREENSHOTS")
DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}  # a phone's CSS pixels (iPhone 12 to 15)


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


def start_web(dsn: str, log: Path) -> Server:
    port = free_port()
    sink = open(log, "wb")  # noqa: SIM115 (the child writes to it until it stops)
    process = subprocess.Popen(
        [sys.executable, "-m", "claimsched.cli", "web", "--dsn", dsn, "--bind",
         f"127.0.0.1:{port}"],
        env=dict(os.environ), stdout=sink, stderr=subprocess.STDOUT)
    sink.close()

    def listening() -> bool:
        assert process.poll() is None, f"claimsched web exited:\n{log.read_text()}"
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, f"claimsched web on port {port}", timeout=30, log=log)
    return Server(f"http://127.0.0.1:{port}", process, log)


def stop_web(server: Server) -> None:
    code = stop_process(server.process, 15)
    if code == -signal.SIGKILL:
        pytest.fail(f"claimsched web did not stop on SIGTERM:\n{server.log.read_text()}")
    assert code == 0, f"claimsched web exited with {code}:\n{server.log.read_text()}"


@pytest.fixture
def web_server(tmp_path: Path) -> Iterator[Callable[[str], Server]]:
    started: list[Server] = []

    def start(dsn: str) -> Server:
        server = start_web(dsn, tmp_path / f"web-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        stop_web(server)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"Debian's chromium is missing ({CHROMIUM}): apt-get install chromium "
                    "(scripts/bootstrap.sh installs it when run as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class Watched:
    """A page with everything that went wrong on it: console errors, uncaught exceptions,
    dialogs (an alert() from injected markup would be one)."""

    page: Any
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def goto(self, url: str, status: int = 200) -> None:
        response = self.page.goto(url, wait_until="load")
        assert response is not None and response.status == status, (url, response)

    def assert_clean(self, expected_status: int | None = None) -> None:
        errors = self.console_errors
        if expected_status is not None:  # the browser logs an error status as a failed load
            errors = [e for e in errors if f"status of {expected_status}" not in e]
        assert errors == [], errors
        assert self.page_errors == [], self.page_errors
        assert self.dialogs == [], self.dialogs

    def screenshot(self, path: Path) -> None:
        self.page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(SCREENSHOTS) / path.name)

    def overflow(self) -> int:
        """How many CSS pixels the page is wider than the window (0: it fits; a wide table
        scrolls inside its own box instead)."""
        return int(self.page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"))


def watch(browser: Any, viewport: dict[str, int], *, mobile: bool = False) -> Iterator[Watched]:
    """A page in a new browser context of this size, watched for errors; closed afterwards."""
    context = browser.new_context(viewport=viewport, is_mobile=mobile, has_touch=mobile)
    page = context.new_page()
    found = Watched(page)
    page.on("console", lambda m: found.console_errors.append(m.text) if m.type == "error"
            else None)
    page.on("pageerror", lambda e: found.page_errors.append(str(e)))

    def dialog(d: Any) -> None:
        found.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    yield found
    context.close()


@pytest.fixture
def watched(browser: Any) -> Iterator[Watched]:
    yield from watch(browser, DESKTOP)


@pytest.fixture
def phone(browser: Any) -> Iterator[Watched]:
    """A phone's width, laid out as a mobile browser does (the page's viewport meta counts)."""
    yield from watch(browser, PHONE, mobile=True)
