"""A real browser for the console's test: Debian's Chromium driven by Selenium through /usr/bin/chromedriver.

CI machines start without Chromium, so `ensure_chromium()` installs Debian's `chromium` and `chromium-driver`
when they are missing and the tests run as root (`apt-get update` first), under a file lock so that parallel
sessions install once. Otherwise the caller skips, naming why. Selenium is pointed at the system driver and
browser, so it never downloads either.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Without Debian's recommends (mesa's drivers, a printer tool, udev, ...), which a headless browser does not
# use and which more than double what CI downloads; a font, so that pages have text metrics.
PACKAGES = ("chromium", "chromium-driver", "fonts-liberation")
INSTALL_LOCK = Path(tempfile.gettempdir()) / "zkraft-chromium-install.lock"
INSTALL_TIMEOUT_S = 900.0
# What this machine's Chromium needs: no sandbox as root, no GPU, nothing fetched in the background.
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
    "--window-size=1280,1024",
)
PAGE_LOAD_TIMEOUT_S = 60.0


def _installed() -> bool:
    return CHROMIUM.exists() and CHROMEDRIVER.exists()


def ensure_chromium() -> str | None:
    """None when Chromium and ChromeDriver are there (installed now if need be); else why not, for a skip."""
    if _installed():
        return None
    if os.geteuid() != 0:
        return f"{CHROMIUM} or {CHROMEDRIVER} missing and not root to apt-get install {' '.join(PACKAGES)}"
    if shutil.which("apt-get") is None:
        return f"{CHROMIUM} or {CHROMEDRIVER} missing and no apt-get to install them"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with open(INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be installing: wait for it, then look again
        if _installed():
            return None
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]):
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
            )
            if done.returncode != 0:
                tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
                return f"`{' '.join(command)}` failed ({done.returncode}): {tail}"
    return None if _installed() else f"{' '.join(PACKAGES)} installed but {CHROMIUM} or {CHROMEDRIVER} is missing"


@contextlib.contextmanager
def chromium(profile_dir: Path) -> Iterator[Any]:
    """A headless Chromium with a fresh profile in `profile_dir`; quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()


@contextlib.contextmanager
def screenshot_on_failure(driver: Any, directory: Path, name: str) -> Iterator[None]:
    """On an exception, save the page's screenshot and HTML into `directory` and print where, then re-raise."""
    try:
        yield
    except BaseException:
        directory.mkdir(parents=True, exist_ok=True)
        picture = directory / f"{name}.png"
        with contextlib.suppress(Exception):  # a dead browser has no screenshot; the failure itself matters
            driver.get_screenshot_as_file(str(picture))
            (directory / f"{name}.html").write_text(driver.page_source, encoding="utf-8")
            print(f"console test {name} failed on {driver.current_url}; screenshot: {picture}")
        raise
