"""The admin dashboard in a real browser: the proxy with simulators, real traffic (local,
cloud, cache hits, refusals), then /admin opened in headless Chromium (Debian's, through its
chromedriver and selenium), the admin key typed in, and every figure the page shows checked
against /admin/status and the traffic sent. The screenshot is written to test-artifacts/."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from policies.apikeys import digest
from tests.mix import mixed_policy
from tests.processes import FAST_ENGINE, proxy, sim

ADMIN_KEY = "sk-admin-dashboard"
CLOUD = ("--personality", "cloud", "--decode-base-ms", "1", "--output-tokens", "8")
# As the machine notes say: without the background-networking flags Chromium keeps trying to
# reach Google's hosts through this machine's closed network.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-sync",
    "--disable-component-update",
    "--window-size=1400,1500",
)


def policy(engine: str, cloud: str) -> str:
    return mixed_policy(engine, cloud, extra=f'[auth]\nadmin_keys = ["sha256:{digest(ADMIN_KEY)}"]')


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    try:
        yield driver
    finally:
        driver.quit()


def chat(url: str, model: str, tenant: str = "acme", **extra: Any) -> httpx.Response:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"q {extra}"}],
        "max_tokens": 6,
        **extra,
    }
    return httpx.post(
        url + "/v1/chat/completions", json=body, headers={"x-overspill-tenant": tenant}, timeout=30
    )


def shown(driver: webdriver.Chrome, test: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, f'[data-test="{test}"]').text)


# Where the traffic went, as sent: 5 + 1 miss + 1 limited local, 3 hits, 2 cloud; a model
# nobody serves is counted as "other" (clients cannot grow the table).
TRAFFIC = {
    "traffic-m-local": "7",
    "traffic-m-cache": "3",
    "traffic-m-refused": "2",
    "traffic-hosted-cloud": "2",
    "traffic-other-refused": "1",
}


def figures(status: dict[str, Any]) -> dict[str, str]:
    """What the page must show for this /admin/status."""
    cache = status["cache"]
    keys = ("hits_exact", "hits_semantic", "misses", "entries", "refused", "disagreed", "coalesced")
    lookups = cache["hits_exact"] + cache["hits_semantic"] + cache["misses"]
    rate = (cache["hits_exact"] + cache["hits_semantic"]) / lookups * 100
    return {f"cache-{key}": str(cache[key]) for key in keys} | {
        "cache-hit-rate": f"{rate:.1f}%",
        "backend-local-health": "up",
        "backend-local-in_flight": str(status["backends"][0]["in_flight"]),
        "backend-local-breaker": status["breakers"]["local"]["state"],
        "cloud-mini-breaker": "closed",
        "policy-source": status["policy"]["source"],
    }


def on_page(driver: webdriver.Chrome, wanted: dict[str, str]) -> dict[str, str]:
    """The page's figures for the keys of `wanted` ("decisions": its rows of decisions). The page
    redraws as it polls: an element found just before a redraw is gone when read, so the figures
    are read again (a redraw takes milliseconds, a poll comes every second or so)."""
    for _ in range(READS):
        with contextlib.suppress(StaleElementReferenceException):
            page = {key: shown(driver, key) for key in wanted if key != "decisions"}
            rows = driver.find_elements(By.CSS_SELECTOR, "#decisions tr")
            return page | {"decisions": str(len(rows))}
    raise AssertionError(f"the page redrew during each of {READS} reads")


READS = 20


def oldest_decision(driver: webdriver.Chrome) -> str:
    """The text of the last row of decisions, read again if the page redrew meanwhile."""
    for _ in range(READS):
        with contextlib.suppress(StaleElementReferenceException):
            return str(driver.find_elements(By.CSS_SELECTOR, "#decisions tr")[-1].text)
    raise AssertionError(f"the page redrew during each of {READS} reads")


def test_the_dashboard_shows_what_the_proxy_knows(
    browser: webdriver.Chrome, artifact: Callable[[str], Path]
) -> None:
    with (
        sim(*FAST_ENGINE, "--model", "m") as engine,
        sim(*CLOUD) as cloud,
        proxy(policy(engine.url, cloud.url)) as p,
    ):
        sent = [chat(p.url, "m", temperature=1) for _ in range(5)]  # local
        sent += [chat(p.url, "m", temperature=0, seed=1) for _ in range(4)]  # 1 miss, 3 hits
        sent += [chat(p.url, "hosted") for _ in range(2)]  # cloud
        sent += [chat(p.url, "m", tenant="limited", temperature=1) for _ in range(3)]  # 1 + 2x 429
        sent += [chat(p.url, "nope")]  # 404
        statuses = [r.status_code for r in sent]
        assert statuses.count(429) == 2 and statuses.count(404) == 1  # noqa: PT018

        browser.get(p.url + "/admin")
        wait = WebDriverWait(browser, 60)
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())  # 401 without key
        browser.find_element(By.ID, "key").send_keys(ADMIN_KEY)
        browser.find_element(By.CSS_SELECTOR, "#login button").click()
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded"))
        admin = {"authorization": f"Bearer {ADMIN_KEY}"}

        def expected() -> dict[str, str]:
            status = httpx.get(p.url + "/admin/status", headers=admin).json()
            return figures(status) | TRAFFIC | {"decisions": str(len(sent))}

        # The page polls: a request is counted just after its answer, so the refresh that
        # shows the last one may come later. Wait for it (the figures below then say why not).
        with contextlib.suppress(TimeoutException):
            WebDriverWait(browser, 60).until(lambda d: on_page(d, want := expected()) == want)
        want = expected()
        assert want["cache-hits_exact"] == "3"
        assert on_page(browser, want) == want
        assert "least outstanding" in oldest_decision(browser)  # the first local request
        bars = browser.find_elements(By.CSS_SELECTOR, "#chart rect")
        assert bars  # the chart drew something
        screenshot = artifact("dashboard.png")
        assert browser.save_screenshot(str(screenshot))
        assert screenshot.stat().st_size > 10_000
