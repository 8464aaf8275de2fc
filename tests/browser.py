"""Debian's headless chromium, driven by playwright, for the site's browser tests.

Never `playwright install`: no browser is downloaded. Under CI=true a missing browser fails the
test; elsewhere it is skipped with the reason. Every page error, console error and dialog (a
file's text that ran as script) is collected into `problems`, which the test asserts empty.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing: apt-get install -y chromium"
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is missing: pip install -e '.[dev]'"
    return None


def require_browser() -> None:
    missing = _missing()
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true: " + missing, pytrace=False)
        pytest.skip(missing)


def artifacts() -> Path:
    """Where screenshots go: $HARNESS_ARTIFACTS, default <repo>/artifacts/ (CI's artefacts)."""
    folder = Path(os.environ.get("HARNESS_ARTIFACTS") or REPO / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def watched_page(problems: list[str]) -> Iterator[Any]:
    """A 1280x900 page whose errors, console errors and dialogs land in `problems`."""
    from playwright.sync_api import Dialog, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)
            # Loading a page runs its scripts (every chart drawn) before "load": on a busy 2-core CI
            # machine one navigation once took over 20 s. A page that never loads still fails.
            page.set_default_navigation_timeout(90_000)
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)

            def ran_script(dialog: Dialog) -> None:  # an alert() from a file's text: the page must never get here
                problems.append(f"a file's text ran as script: {dialog.message}")
                dialog.dismiss()

            page.on("dialog", ran_script)
            yield page
        finally:
            browser.close()
