"""The HTML report renders in a real browser (headless Chromium), offline, with escaped names."""

import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from conftest import TINY

import bayeskern as bk

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({HOSTILE: rng.uniform(0, 5, 30)})
    y = np.sin(X.iloc[:, 0].to_numpy()) + 0.1 * rng.normal(size=30)
    gp = bk.GPRegressor(random_state=0, **TINY).fit(X, y)
    path = tmp_path_factory.mktemp("report") / "report.html"
    bk.report(
        gp,
        path,
        X_test=X.iloc[:5],
        y_test=y[:5],
        title=f"title {HOSTILE}",
        data_name=f"file {HOSTILE}.csv",
    )
    return path


def test_user_strings_are_escaped_and_nothing_is_fetched(report_path):
    html = report_path.read_text()
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()
    assert "Content-Security-Policy" in html
    assert "http://" not in html and "https://" not in html


def _render(page, tmp_path, height=2400):
    """Screenshot ``page`` in headless Chromium; return (image, URLs the page requested)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (make test installs Debian's chromium when it can)")
    shot, netlog = tmp_path / "shot.png", tmp_path / "net.json"
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--log-net-log={netlog}",
        f"--window-size=1100,{height}",
        f"--screenshot={shot}",
        page.as_uri(),
    ]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium produced no screenshot"
    import matplotlib.image as mpimg

    log = json.loads(netlog.read_text())
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    # requests made on behalf of the page carry the file:// isolation key; the browser's own
    # background requests (update checks, time sync) carry none and are not the page's doing
    page_urls = [
        e["params"]["url"]
        for e in log["events"]
        if names.get(e["type"]) == "URL_REQUEST_START_JOB"
        and "file://" in e["params"].get("network_isolation_key", "")
    ]
    return mpimg.imread(shot), [u for u in page_urls if not u.startswith(("file:", "data:"))]


def test_report_renders_in_headless_chromium_without_network(report_path, tmp_path):
    img, external = _render(report_path, tmp_path)
    assert img.shape[0] >= 2000 and img.shape[1] >= 1000
    # a rendered report has text and figures: far from a blank page
    assert img[..., :3].std() > 0.05
    assert (img[..., :3].mean(axis=-1) < 0.5).mean() > 0.005
    assert not external, f"the report made network requests: {external[:5]}"


def test_network_check_detects_a_fetching_page(tmp_path):
    # control: the same check flags a page that loads an external image
    page = tmp_path / "fetch.html"
    page.write_text('<html><body><img src="https://example.com/x.png">x</body></html>')
    _, external = _render(page, tmp_path)
    assert external == ["https://example.com/x.png"]
