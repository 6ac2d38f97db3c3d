"""Headless Chromium driven by selenium: the one helper the browser tests and
``just screenshots`` share.

It uses Debian's ``chromium`` and ``chromium-driver`` (installed by scripts/browser.sh),
never a browser downloaded at run time: the driver path is given, so Selenium Manager has
nothing to fetch.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

#: Every wait on the page is bounded by this many seconds (a generous upper bound).
PAGE_TIMEOUT = 20.0
DESKTOP = (1280, 800)
PHONE = (390, 844)
#: Headless Chromium's narrowest window (CSS pixels).
MIN_WINDOW_WIDTH = 500

T = TypeVar("T")


def chromium_paths() -> tuple[str, str]:
    """(browser, driver) executables; AssertionError naming the install step if missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        raise AssertionError(
            "chromium and chromium-driver are needed: run scripts/browser.sh (just test does it)"
        )
    return browser, driver


@contextmanager
def chromium(size: tuple[int, int] = DESKTOP) -> Iterator[WebDriver]:
    """A headless Chromium window of ``size`` CSS pixels; quit on exit."""
    browser, driver_path = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root in containers; the pages are our own
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        f"--window-size={size[0]},{size[1]}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        driver.set_page_load_timeout(PAGE_TIMEOUT)
        if size[0] < MIN_WINDOW_WIDTH:
            # Chromium's windows are never narrower: emulate the phone's screen instead.
            driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": True},
            )
        yield driver
    finally:
        driver.quit()


def wait_until(driver: WebDriver, condition: Callable[[WebDriver], T], what: str) -> T:
    """Wait (≤ PAGE_TIMEOUT) until ``condition(driver)`` is truthy; fail saying ``what``."""
    result: Any = WebDriverWait(driver, PAGE_TIMEOUT, poll_frequency=0.05).until(
        condition, message=f"timed out waiting for {what}"
    )
    return result  # type: ignore[no-any-return]
