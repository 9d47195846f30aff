"""The README's picture of the demo: `overspill serve --demo` under `overspill demo traffic`, its
dashboard (/admin) captured in headless Chromium (Debian's, as the dashboard test drives it;
`scripts/browser` installs it).

    python -m bench.demo_screenshot [--out docs/figures/demo-dashboard.png] [--seconds 120]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.test_dashboard import CHROMIUM_FLAGS
from tests.processes import ROOT, demo, overspill_command

_REFRESH_S = 2.0  # the dashboard polls the proxy this often


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs/figures/demo-dashboard.png")
    parser.add_argument("--seconds", type=float, default=120.0, help="traffic before the shot")
    parser.add_argument("--rps", type=float, default=20.0)
    args = parser.parse_args()
    with demo() as proxy:
        command = overspill_command(
            "demo",
            "traffic",
            "--url",
            proxy.url,
            "--rps",
            str(args.rps),
            "--seconds",
            str(args.seconds + 30),
            "--seed",
            "1",
        )
        with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL) as traffic:
            time.sleep(args.seconds)  # a script, not a test: let the chart fill up
            shoot(proxy.url + "/admin", args.out)
            traffic.terminate()
    print(f"{args.out} ({args.out.stat().st_size:,} bytes)")


def shoot(url: str, out: Path) -> None:
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    with tempfile.TemporaryDirectory(prefix="overspill-chromium-") as profile:
        for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        try:
            driver.get(url)
            WebDriverWait(driver, 30).until(
                lambda d: d.find_element("tag name", "body").get_attribute("data-loaded")
            )
            time.sleep(2 * _REFRESH_S)  # the chart and the tables after a refresh or two
            out.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(out))
        finally:
            driver.quit()


if __name__ == "__main__":
    main()
