"""The sampler demo end to end: eight schools' sampler exported, then sampled in a real
Chromium with onnxruntime-web in a Web Worker, against ONNX Runtime's CPU build from the
same seed. Needs the `pymc` extra; the browser as tests/conftest.py's `chromium` says."""

import json

import numpy as np
import pytest

pytest.importorskip("pymc")
az = pytest.importorskip("arviz")

from pt_onnxscript.demos import sampler

DRAWS = 1000


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = sampler.build_site(tmp_path_factory.mktemp("sampler"))
    return site, json.loads((site / "sampler.json").read_text())


@pytest.fixture(scope="module")
def page(site, open_page):
    return open_page(site[0], "sampler.html")


def _in_browser(page, seed: int, draws: int, warmup: bool):
    result = page.evaluate(
        "([seed, draws, warmup]) => window.sampleInBrowser(seed, draws, warmup)",
        [seed, draws, warmup],
    )
    outputs = {
        name: np.array(value["data"]).reshape(value["dims"])
        for name, value in result["outputs"].items()
    }
    return outputs, result["seconds"]


def test_the_seed_makes_the_starts_the_page_makes(site, page):
    """The page's SplitMix64 and jitter are starting_feed's, bit for bit."""
    meta = site[1]
    for seed in (0, 1, 2**53 - 1):
        expected = sampler.starting_feed(meta, seed)
        got = page.evaluate(
            """(seed) => {
                const { position, rng } = window.startingFeed(seed);
                return { position: Array.from(position), rng: Array.from(rng, String) };
            }""",
            seed,
        )
        np.testing.assert_array_equal(np.array(got["position"]), expected["position"].ravel())
        assert [int(v) for v in got["rng"]] == expected["rng"].tolist()
    with pytest.raises(ValueError, match="seed must be an integer in \\[0, 2\\*\\*53\\)"):
        sampler.starting_feed(meta, -1)


def test_the_browser_samples_what_the_cpu_samples(site, page):
    """From the same seed, the browser's transitions are the CPU's while their arithmetic
    agrees (the first 10, to 1e-9: libm's last bits differ between the two builds, and the
    warm-up's early, long trajectories amplify them), and its posterior is the CPU's: every mean within 4 Monte
    Carlo standard errors, every standard deviation within 10%, R-hat <= 1.01, no
    divergence."""
    path, meta = site[0] / "model" / "sampler.onnx", site[1]
    got, _ = _in_browser(page, 11, DRAWS, warmup=True)
    expected = sampler.run(path, meta, 11, DRAWS, warmup=True)
    assert sorted(got) == sorted(expected)
    for name, values in expected.items():
        assert got[name].shape == values.shape, name
    for name in ("positions", "logp", "accept_prob", "step_size"):
        np.testing.assert_allclose(
            got[name][:10], expected[name][:10], rtol=1e-9, atol=1e-10, err_msg=name
        )
    np.testing.assert_array_equal(got["n_steps"][:10], expected["n_steps"][:10])
    tune = meta["tune"]
    runs = []
    for outputs in (got, expected):
        posterior = {
            entry["name"]: np.swapaxes(outputs[entry["output"]][tune:], 0, 1)
            for entry in meta["posterior"]
        }
        runs.append(az.summary(az.from_dict(posterior=posterior)))
        assert not outputs["diverging"][tune:].any()
    browser, cpu = runs
    error = np.hypot(browser["mcse_mean"], cpu["mcse_mean"])
    assert (np.abs(browser["mean"] - cpu["mean"]) <= 4 * error).all(), (browser, cpu)
    assert (np.abs(browser["sd"] / cpu["sd"] - 1) <= 0.1).all(), (browser, cpu)
    assert (browser["r_hat"] <= 1.01).all(), browser
    assert not page.errors


def test_the_button_samples_and_draws_the_posterior(page):
    """As a visitor uses it: a seed, a number of draws, the button; the progress bar fills,
    and the summary, the histograms and the trace appear."""
    page.fill("#seed", "3")
    page.fill("#draws", "200")
    page.click("#run")
    page.wait_for_function("!document.querySelector('#results').hidden", timeout=60_000)
    assert page.evaluate("document.querySelector('#progress').value") == 1
    status = page.inner_text("#status")
    assert status.startswith("4 chains x 200 draws after 1000 warm-up transitions in"), status
    rows = page.locator("#summary tr").count()
    assert rows == 1 + 2 + 8 + 8  # the header, mu, tau, offset and theta of each school
    assert page.locator("#histograms canvas").count() == rows - 1
    page.fill("#draws", "0")
    page.click("#run")
    assert "the draws a whole number >= 1" in page.inner_text("#error")
    assert not page.errors
