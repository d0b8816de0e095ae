"""The traffic viewer in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium):
the page loads without console errors, a new exchange appears live, the filter narrows the list, and a row opens
with a pretty-printed JSON body. Saves the screenshot the README shows.

usage: viewer_browser_test.py HOOKPROXY_BINARY SCREENSHOT.png
"""
import json
import subprocess
import urllib.parse
import urllib.request
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from hookproxy_process import Hookproxy, wait_until


def browser():
    options = Options()
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1500,860", "--no-proxy-server", "--force-device-scale-factor=1"]:
        options.add_argument(argument)
    options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def paths(driver):
    """The paths of the rows drawn, read in one script (the list redraws its rows, so element handles go stale)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#rows .row.flow .c-path')].map(e => e.textContent)")


def rows(driver):
    return paths(driver)


def har_urls(proxy, words):
    """The URLs of /api/har?filter=WORDS, asked of the viewer directly (not through the proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(proxy.url + "/api/har?filter=" + urllib.parse.quote(words), timeout=20) as response:
        return [entry["request"]["url"] for entry in json.load(response)["log"]["entries"]]


def click_row(driver, path):
    driver.execute_script(
        "const row = [...document.querySelectorAll('#rows .row.flow')]"
        ".find(r => r.querySelector('.c-path').textContent === arguments[0]); row.click();", path)


def main(binary, screenshot):
    with Hookproxy(binary) as proxy:
        for path in ["/users/1", "/missing", "/health"]:
            proxy.through(f"http://api.viewer.test{path}")
        proxy.through("http://cdn.viewer.test/logo.svg")
        proxy.through(proxy.origin.url + "/json")
        driver = browser()
        try:
            driver.get(proxy.url + "/")
            assert driver.title.startswith("hookproxy"), driver.title
            wait_until(lambda: len(rows(driver)) == 5, what="the five earlier exchanges in the list")

            # a new exchange appears live (server-sent events)
            assert proxy.through("http://api.viewer.test/users/42?live=1") == 200
            wait_until(lambda: "/users/42?live=1" in paths(driver), what="the new exchange in the list")
            assert len(rows(driver)) == 6

            # the filter narrows the list
            box = driver.find_element(By.ID, "filter")
            box.send_keys("status:4xx")
            wait_until(lambda: paths(driver) == ["/missing"], what="status:4xx to leave only /missing")
            box.clear()
            box.send_keys("-5xx host:api users")
            wait_until(lambda: paths(driver) == ["/users/1", "/users/42?live=1"], what="the users filter")

            # a row opens with a pretty-printed JSON body
            click_row(driver, "/users/42?live=1")
            body = wait_until(lambda: [e for e in driver.find_elements(By.CSS_SELECTOR, "#detail pre.json")
                                       if '\n  "name": "Ada Lovelace"' in e.get_attribute("textContent")],
                              what="the pretty-printed JSON body")
            assert '"roles": [\n    "admin"' in body[0].get_attribute("textContent")
            assert driver.find_element(By.ID, "copy-curl").is_displayed()

            # the picture for the README: the whole list, the JSON exchange open
            proxy.through(proxy.origin.url + "/redirect")
            proxy.through(proxy.origin.url + "/hello")
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(Keys.BACKSPACE)
            wait_until(lambda: len(rows(driver)) == 9, what="the whole list again (hookproxy follows the redirect: two hops)")

            # the page's filter and /api/har?filter= (FlowFilter.swift) agree
            for words in ["status:4xx", "-5xx host:api users", "rule:follow-redirects", "hook:redirect", "json -GET", "error"]:
                box.send_keys(Keys.CONTROL, "a")
                box.send_keys(Keys.BACKSPACE)
                box.send_keys(words)
                har = har_urls(proxy, words)
                wait_until(lambda: sorted(paths(driver)) == sorted(urllib.parse.urlsplit(u).path + (
                    "?" + urllib.parse.urlsplit(u).query if urllib.parse.urlsplit(u).query else "") for u in har),
                    what=f"the page and /api/har to agree on {words!r}")
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(Keys.BACKSPACE)
            wait_until(lambda: len(rows(driver)) == 9, what="the whole list again")

            # a trust decision: the chain, and a trust: snippet copied from the event
            assert proxy.absolute(proxy.tls_origin.url + "/pinned") == 502
            wait_until(lambda: "/pinned" in paths(driver), what="the rejected exchange in the list")
            driver.execute_script("window.copied = []; navigator.clipboard.writeText = t => { window.copied.push(t); return Promise.resolve(); };")
            click_row(driver, "/pinned")
            chain = wait_until(lambda: driver.execute_script(
                "return [...document.querySelectorAll('#detail ol.chain li')].map(li => li.textContent)"),
                what="the trust event's chain")
            assert len(chain) == 1 and chain[0].startswith("CN=localhost") and "sha256//" in chain[0], chain
            driver.execute_script("[...document.querySelectorAll('#detail button')].find(b => b.textContent === 'Copy trust: snippet').click()")
            snippet = wait_until(lambda: driver.execute_script("return window.copied[0]"), what="the copied trust: snippet")
            assert "    match:\n      host: localhost\n    trust:\n      pinning: public_key" in snippet, snippet
            pin = chain[0][chain[0].index("sha256//"):]
            assert f'      pins: ["{pin}"]' in snippet, (pin, snippet)
            wait_until(lambda: len(rows(driver)) == 10, what="ten exchanges")

            # an accepted trust decision shows the chain too (the server's certificate and its pin)
            assert proxy.absolute(proxy.tls_origin.url + "/trusted") == 200
            wait_until(lambda: "/trusted" in paths(driver), what="the accepted exchange in the list")
            click_row(driver, "/trusted")
            # (the pane still shows /pinned until the click's redraw: wait for the accepted event itself)
            accepted = wait_until(lambda: driver.execute_script(
                "const e = [...document.querySelectorAll('#detail .event.trust')][0];"
                "return e && e.textContent.includes('trust accepted') && e.querySelector('ol.chain li') ? e.textContent : null"),
                what="the accepted trust event's chain")
            assert pin in accepted, accepted
            wait_until(lambda: len(rows(driver)) == 11, what="eleven exchanges")

            # the hops of a followed redirect together
            click_row(driver, "/redirect")
            wait_until(lambda: driver.execute_script(
                "return [...document.querySelectorAll('#detail ol.hops li')].map(li => li.textContent)") ==
                [f"302 GET {proxy.origin.url}/redirect", f"200 GET {proxy.origin.url}/json"], what="the redirect's two hops")
            assert "redirect" in driver.find_element(By.ID, "detail").text
            click_row(driver, "/users/42?live=1")
            wait_until(lambda: "Ada Lovelace" in driver.find_element(By.ID, "detail").text, what="the JSON exchange again")
            driver.execute_script("document.activeElement.blur()")
            driver.save_screenshot(screenshot)

            # copy as curl (the clipboard was replaced above to record what is copied)
            driver.execute_script("window.copied = []; document.getElementById('copy-curl').click()")
            command = wait_until(lambda: driver.execute_script("return window.copied[0]"), what="the copied curl command")
            assert command.startswith("curl -X GET 'http://api.viewer.test/users/42?live=1' -H "), command

            # clear: the page's POST carries its own Origin, and the list empties
            driver.find_element(By.ID, "clear").click()
            wait_until(lambda: rows(driver) == [] and driver.find_element(By.ID, "empty").is_displayed(), what="an empty list")

            errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
            assert not errors, f"console errors: {errors}"
        finally:
            driver.quit()
    print("viewer browser test: passed (screenshot: %s)" % screenshot)


def ten_thousand(binary):
    """10,000 exchanges: the page loads them all, draws only the rows in view, and filters them promptly."""
    with Hookproxy(binary, extra=["--ui-flows", "10000"]) as proxy:
        with tempfile.NamedTemporaryFile("w", suffix=".curl") as config:
            for i in range(10_000):
                path = "/missing" if i % 10 == 0 else f"/users/{i}"
                config.write(f'url = "http://api.viewer.test{path}"\noutput = "/dev/null"\n')
            config.flush()
            subprocess.run(["curl", "-s", "--parallel", "--parallel-max", "32", "-x", proxy.url, "-K", config.name],
                           check=True, timeout=300, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        driver = browser()
        try:
            started = time.monotonic()
            driver.get(proxy.url + "/")
            count = lambda: driver.find_element(By.ID, "count").text
            wait_until(lambda: count() == "10000", timeout=60, what="all 10,000 exchanges listed")
            loaded = time.monotonic() - started
            drawn = len(paths(driver))
            assert 0 < drawn < 200, f"{drawn} rows in the DOM for 10,000 exchanges (the list is not virtualized)"
            started = time.monotonic()
            driver.find_element(By.ID, "filter").send_keys("status:4xx")
            wait_until(lambda: count() == "1000 of 10000", timeout=30, what="the filter over 10,000 exchanges")
            filtered = time.monotonic() - started
            driver.execute_script("document.getElementById('viewport').scrollTop = 1e9")
            wait_until(lambda: paths(driver) and all(p == "/missing" for p in paths(driver)), what="scrolled rows")
            errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
            assert not errors, f"console errors: {errors}"
            print(f"viewer with 10,000 exchanges: loaded in {loaded:.2f} s, {drawn} rows drawn, filtered in {filtered:.2f} s")
        finally:
            driver.quit()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    ten_thousand(sys.argv[1])
