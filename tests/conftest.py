import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from pt_onnxscript.opsets import DEFAULT_OPSET, MIN_OPSET, newest_opset

# The floor, the default and the newest opset; the newest (translations are written against
# the floor, so it repeats the same checks under newer imports) only with -m slow.
OPSETS = [
    o if o in (MIN_OPSET, DEFAULT_OPSET) else pytest.param(o, marks=pytest.mark.slow)
    for o in sorted({MIN_OPSET, DEFAULT_OPSET, newest_opset()})
]


@pytest.fixture(params=OPSETS, ids=lambda o: f"opset{o}")
def opset(request):
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


_session_init = ort.InferenceSession.__init__


def _one_thread_session(self, path_or_bytes, sess_options=None, *args, **kwargs):
    """ONNX Runtime's session on one intra-op thread unless the caller chose a number: the
    tests run one pytest-xdist worker per core, and a default pool per session (a thread per
    core, spinning while it waits) in every worker oversubscribes the cores (~12% more CPU
    for the suite). The tests check values, not speed."""
    if sess_options is None:
        sess_options = ort.SessionOptions()
    if sess_options.intra_op_num_threads == 0:
        sess_options.intra_op_num_threads = 1
    _session_init(self, path_or_bytes, sess_options, *args, **kwargs)


ort.InferenceSession.__init__ = _one_thread_session


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def chromium():
    """Debian's Chromium, headless, driven by Playwright, for the demo pages' tests. Without
    it, Playwright or onnxruntime-web (`npm ci` in pt_onnxscript/demos/web) they skip, unless
    PT_ONNXSCRIPT_REQUIRE_BROWSER is set (CI sets it, so they always run there)."""
    from pt_onnxscript.demos.web import server

    problems = []
    if not CHROMIUM.exists():
        problems.append("Debian's chromium (apt-get install chromium)")
    try:
        server.check_runtime()
    except FileNotFoundError as err:
        problems.append(str(err))
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problems.append("playwright (pip install playwright)")
    if problems:
        message = "browser tests need " + "; ".join(problems)
        if os.environ.get("PT_ONNXSCRIPT_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def open_page(chromium):
    """``open_page(site, path="", on_loaded=None)``: serve `site` (the demo pages' server),
    open `path` in Chromium and wait until the page says it is ready; the page's uncaught
    errors collect in ``page.errors``. Pages and servers close with the module."""
    from pt_onnxscript.demos.web import server

    opened = []

    def open_(site, path: str = "", on_loaded=None):
        httpd, url = server.serve(site, on_loaded=on_loaded)
        page = chromium.new_page()
        opened.append((page, httpd))
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.goto(f"{url}/{path}")
        ready = "window.__ready === true || window.__error !== undefined"
        page.wait_for_function(ready, timeout=60_000)
        assert page.evaluate("window.__error") is None, page.evaluate("window.__error")
        return page

    yield open_
    for page, httpd in opened:
        page.close()
        httpd.shutdown()
