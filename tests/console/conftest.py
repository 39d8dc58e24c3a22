"""The console's tests: a name server and a broker with data (tests/client/cluster.py), the
console as a subprocess, and Debian's chromium driven through its chromedriver by Selenium."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from console_helpers import browser_paths


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless chromium with its console log kept (goog:loggingPrefs)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="the browser tests need selenium (the test extra)")
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--disable-extensions", "--no-first-run"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
