"""The console as a subprocess for tests, beside tests/client/cluster.py's servers, and the
browser's whereabouts (Debian's chromium and its chromedriver)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))

from cluster import Server, _start  # noqa: E402

#: the README's screenshots, rewritten only when ROCKETSTORE_UPDATE_SCREENSHOTS=1 (the pages
#: show times and counts, so every run would change them)
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs"


_SCRATCH: list[Path] = []


def save_screenshot(driver: object, name: str) -> Path:
    """A page's screenshot: into docs/ when updating them, else into a scratch folder."""
    import os
    import tempfile

    if os.environ.get("ROCKETSTORE_UPDATE_SCREENSHOTS") == "1" and SCREENSHOTS.is_dir():
        folder = SCREENSHOTS
    else:
        if not _SCRATCH:
            _SCRATCH.append(Path(tempfile.mkdtemp(prefix="rocketstore-console-shots-")))
        folder = _SCRATCH[0]
    target = folder / f"console-{name}.png"
    assert driver.save_screenshot(str(target)), f"no screenshot of {name}"  # type: ignore[attr-defined]
    return target


CONSOLE_BOOT = re.compile(r"The console boot success\. listening on (http://\S+)")
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def require_console() -> None:
    for module in ("starlette", "uvicorn", "jinja2"):
        pytest.importorskip(module, reason=f"the console needs {module}: pip install 'rocketstore[console]'")


class Console(Server):
    """The console as a subprocess (``address`` is its base URL)."""

    @property
    def url(self) -> str:
        return self.address


def start_console(namesrv_addr: str | None, *extra: str, timeout: float = 60.0) -> Console:
    """The console for the cluster behind namesrv_addr (None: extra says what, --store)."""
    require_console()
    cluster_args = [] if namesrv_addr is None else ["-n", namesrv_addr]
    server = _start("console", ["-m", "rocketstore.console", *cluster_args, "--listen", "127.0.0.1:0",
                                *extra], CONSOLE_BOOT, lambda m: m.group(1), timeout)
    return Console(server.name, server.proc, server.address, server.output, server.args)


def browser_paths() -> tuple[str, str]:
    browser = next((p for p in map(shutil.which, CHROMIUM) if p), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip("the browser tests need Debian's chromium and chromium-driver "
                    "(apt-get install -y chromium chromium-driver; .ci/run installs them)")
    return browser, driver


def click_and_wait(driver: object, element: object, timeout: float = 30.0) -> None:
    """Click what submits a form or follows a link, and wait for the next page to replace
    this one (the element going stale) and finish loading."""
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    element.click()  # type: ignore[attr-defined]
    wait = WebDriverWait(driver, timeout)
    wait.until(expected_conditions.staleness_of(element))
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")
