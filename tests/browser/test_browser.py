"""The study app in a real browser: headless Chromium (Debian's package) driven by Selenium.

Open the index, open a question, change an input and see the recomputed number (equal to the
CLI's --json value), take a drill and get it graded. Screenshots go to test-artifacts/browser/
(or $SCALEMODEL_ARTIFACTS). Skipped, with the reason, when Flask, Selenium, chromium or
chromedriver is missing; never downloads a browser.
"""

import os
import shutil
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

flask = pytest.importorskip("flask", reason="the 'web' extra (Flask) is not installed")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")

CHROME = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
if not (CHROME and DRIVER):
    pytest.skip("headless Chromium not found: apt-get install chromium chromium-driver",
                allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402

from conftest import cli_json  # noqa: E402
from scalemodel.web import create_app  # noqa: E402

ART = Path(os.environ.get("SCALEMODEL_ARTIFACTS",
                          Path(__file__).resolve().parents[2] / "test-artifacts")) / "browser"


@pytest.fixture(scope="module")
def base_url():
    from werkzeug.serving import make_server

    srv = make_server("127.0.0.1", 0, create_app(timeout_s=30), threaded=False)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROME
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,1600", "--disable-extensions"):
        opts.add_argument(a)
    try:
        drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    except Exception as e:  # noqa: BLE001 - a broken browser install is a skip, with the reason
        pytest.skip(f"headless Chromium did not start: {str(e).splitlines()[0]}")
    drv.set_page_load_timeout(60)
    drv.implicitly_wait(10)  # a click starts a navigation; wait for the next page's elements
    ART.mkdir(parents=True, exist_ok=True)
    yield drv
    drv.quit()


def test_question_recomputes_like_the_cli(browser, base_url, capsys):
    browser.get(base_url + "/")
    assert "The 24 questions" in browser.page_source
    browser.save_screenshot(str(ART / "index.png"))
    browser.find_element(By.LINK_TEXT, "kv-cache").click()
    assert "/questions/kv-cache" in browser.current_url
    box = browser.find_element(By.ID, "f-context")
    box.clear()
    box.send_keys("16384")
    browser.find_element(By.ID, "submit").click()
    el = browser.find_element(By.CSS_SELECTOR, 'data[data-label="per sequence of 16,384 tokens"]')
    browser.save_screenshot(str(ART / "kv-cache-16k.png"))
    expected = cli_json(capsys, "answer", "kv-cache", "--context", "16384")
    assert float(el.get_attribute("value")) == expected["kv"]["kv_bytes_per_sequence"]


def test_bad_input_shows_next_to_the_field(browser, base_url):
    browser.get(base_url + "/questions/kv-cache")
    box = browser.find_element(By.ID, "f-batch")
    box.clear()
    box.send_keys("zero")
    browser.find_element(By.ID, "submit").click()
    err = browser.find_element(By.ID, "err-batch").text
    browser.save_screenshot(str(ART / "kv-cache-bad-batch.png"))
    assert "zero" in err and "Traceback" not in browser.page_source


def test_drill_is_graded(browser, base_url, capsys):
    d = cli_json(capsys, "drill", "--topic", "kv-cache", "--seed", "3")
    browser.get(base_url + "/drill?topic=kv-cache&seed=3&rounds=2")
    assert d["prompt"] in browser.find_element(By.ID, "prompt").text
    browser.find_element(By.ID, "answer").send_keys(f"{d['answer']:.4g}")
    browser.find_element(By.ID, "grade").click()
    verdict = browser.find_element(By.ID, "verdict")
    browser.save_screenshot(str(ART / "drill-graded.png"))
    assert "Correct" in verdict.text
    browser.find_element(By.ID, "next").click()
    browser.find_element(By.ID, "answer").send_keys("1")
    browser.find_element(By.ID, "grade").click()
    summary = browser.find_element(By.ID, "summary")
    browser.save_screenshot(str(ART / "drill-summary.png"))
    assert summary.is_displayed()
