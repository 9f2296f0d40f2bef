"""The digits demo end to end: train in PyTensor, export, and classify in a real Chromium.

The browser tests need Debian's chromium and `npm ci` in pt_onnxscript/demos/web; without them they
skip, unless PT_ONNXSCRIPT_REQUIRE_BROWSER is set (CI sets it, so they always run there).
"""

import re
import time

import numpy as np
import pytest

pytest.importorskip("sklearn")

from pt_onnxscript.demos import digits
from pt_onnxscript.demos.web import server


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    split = digits.load_digits()
    params = digits.init_params()
    reports = []
    accuracy, predict = digits.train(split, params, progress=lambda *r: reports.append(r))
    site = digits.build_site(params, split, tmp_path_factory.mktemp("site"))
    return split, accuracy, predict, site, reports


def test_training_reaches_97_percent_and_onnx_runtime_agrees(trained):
    split, accuracy, predict, site, reports = trained
    assert accuracy >= 0.97
    # Each epoch reported: its number, the mean loss, the held-out accuracy so far.
    assert [r[:2] for r in reports] == [(epoch, 30) for epoch in range(1, 31)]
    assert reports[-1][3] == accuracy and reports[-1][2] < reports[0][2]
    expected = predict(split.x_test)
    got = digits.onnx_probabilities(site / "model" / "digits.onnx", split.x_test)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert (got.argmax(1) == expected.argmax(1)).all()


def test_the_cnn_idiom_exports_as_conv_maxpool_and_relu(trained):
    import onnx

    model = onnx.load(str(trained[3] / "model" / "digits.onnx"))
    ops = [node.op_type for node in model.graph.node]
    assert ops.count("Conv") == 1 and ops.count("MaxPool") == 1 and "Relu" in ops


@pytest.fixture(scope="module")
def page(trained, open_page):
    loads = []
    page = open_page(trained[3], on_loaded=lambda *report: loads.append(report))
    page.loads = loads
    return page


def test_every_held_out_digit_in_the_browser(trained, page):
    split, _, _, site, _ = trained
    pixels = split.x_test.reshape(-1).tolist()
    probabilities = page.evaluate("([p, n]) => window.classify(p, n)", [pixels, len(split.x_test)])
    in_browser = np.asarray(probabilities, dtype="float32").reshape(-1, 10)
    in_python = digits.onnx_probabilities(site / "model" / "digits.onnx", split.x_test)
    np.testing.assert_allclose(in_browser, in_python, rtol=1e-5, atol=1e-6)
    assert (in_browser.argmax(1) == in_python.argmax(1)).all()
    assert not page.errors


def test_the_page_shows_and_reports_the_models_size_and_load_time(trained, page):
    size = (trained[3] / "model" / "digits.onnx").stat().st_size
    status = page.locator("#status").text_content()
    assert re.fullmatch(
        rf"model loaded: {size / 1000:.1f} kB in \d+ ms \(onnxruntime-web [\d.]+\)", status
    ), status
    deadline = time.monotonic() + 10
    while not page.loads and time.monotonic() < deadline:
        time.sleep(0.05)
    ((reported_size, milliseconds),) = page.loads
    assert reported_size == size and 0 < milliseconds < 60_000


def test_the_demo_prints_the_models_size_and_operators(trained):
    described = digits.describe(trained[3] / "model" / "digits.onnx")
    assert re.fullmatch(r"\d+\.\d kB, \d+ nodes \(.*Conv.*MaxPool.*\)", described), described


def test_a_drawn_stroke_gets_a_prediction(page):
    box = page.locator("#pad").bounding_box()
    page.mouse.move(box["x"] + 128, box["y"] + 40)
    page.mouse.down()
    for step in range(1, 11):
        page.mouse.move(box["x"] + 128, box["y"] + 40 + 18 * step)
    page.mouse.up()
    page.wait_for_function("document.getElementById('prediction').textContent.match(/^[0-9]$/)")
    assert page.locator("#probabilities tr").count() == 10
    assert page.text_content("#error") == ""


def test_a_held_out_sample_from_the_menu(trained, page):
    split, _, _, site, _ = trained
    page.select_option("#sample", "3")
    page.wait_for_function("document.getElementById('label').textContent !== ''")
    expected = digits.onnx_probabilities(site / "model" / "digits.onnx", split.x_test[3:4]).argmax()
    assert page.text_content("#prediction") == str(expected)
    assert page.text_content("#label") == f"(label {split.y_test[3]})"


def _bars(page):
    """The ten bars' widths in pixels."""
    return page.evaluate(
        "Array.from(document.querySelectorAll('#probabilities .bar'), (b) => b.offsetWidth)"
    )


def _preview(page):
    """The 8 x 8 preview's grey levels."""
    return page.evaluate(
        """Array.from(document.getElementById('preview').getContext('2d')
            .getImageData(0, 0, 8, 8).data.filter((_, i) => i % 4 === 0))"""
    )


def test_the_page_classifies_its_preselected_sample_on_load(trained, page):
    split, _, _, site, _ = trained
    page.reload()
    page.wait_for_function("window.__ready === true")
    expected = digits.onnx_probabilities(site / "model" / "digits.onnx", split.x_test[:1])[0]
    assert page.text_content("#prediction") == str(expected.argmax())
    assert page.text_content("#label") == f"(label {split.y_test[0]})"
    assert abs(sum(_bars(page)) - 200) < 3  # the probabilities' bars, 200 px in all
    assert max(_preview(page)) > 0
    assert "mouse or a finger" in page.text_content("#instruction")


def test_clear_clears_the_pad_the_bars_and_the_preview(page):
    page.select_option("#sample", "5")
    page.wait_for_function(
        "document.getElementById('label').textContent === '(label ' + "
        "document.getElementById('sample').selectedOptions[0].text.slice(-2, -1) + ')'"
    )
    assert max(_preview(page)) > 0 and max(_bars(page)) > 0
    page.click("#clear")
    assert _bars(page) == [0] * 10
    assert _preview(page) == [0] * 64
    assert page.text_content("#prediction") == "\u2013" and page.text_content("#label") == ""
    pad = page.evaluate(
        "Math.max(...document.getElementById('pad').getContext('2d')"
        ".getImageData(0, 0, 256, 256).data.filter((_, i) => i % 4 === 0))"
    )
    assert pad == 0


def test_a_finger_draws_too(page):
    page.click("#clear")
    box = page.locator("#pad").bounding_box()
    x = box["x"] + 128
    events = [("pointerdown", 40)] + [("pointermove", 40 + 18 * i) for i in range(1, 11)]
    for kind, y in [*events, ("pointerup", 220)]:
        page.locator("#pad").dispatch_event(
            kind,
            {
                "pointerType": "touch",
                "pointerId": 2,
                "isPrimary": True,
                "clientX": x,
                "clientY": box["y"] + y,
                "bubbles": True,
            },
        )
    page.wait_for_function("document.getElementById('prediction').textContent.match(/^[0-9]$/)")
    assert max(_preview(page)) > 0


def test_the_bars_stay_where_they_are(trained, page):
    page.click("#clear")
    table = page.locator("#probabilities")
    boxes = [table.bounding_box()]
    for sample in ("1", "2", "7"):
        page.select_option("#sample", sample)
        page.wait_for_function("document.getElementById('label').textContent !== ''")
        boxes.append(table.bounding_box())
        page.click("#clear")
        boxes.append(table.bounding_box())
    assert all(box == boxes[0] for box in boxes), boxes


@pytest.mark.filterwarnings("ignore:RandomVariable Ops will stop hiding:DeprecationWarning")
def test_random_draws_reproduce_in_the_browser(trained, page):
    # Philox in onnxruntime-web's wasm build (uint64 Mul, BitShift, Xor), and the samplers'
    # Loops: the same state gives the draws and the advanced state ONNX Runtime's CPU gives.
    import onnxruntime as ort
    import pytensor
    import pytensor.tensor as pt

    from pt_onnxscript import export_onnx
    from pt_onnxscript.rng import state_from_generator

    rng = pytensor.shared(np.random.default_rng(7), name="rng")
    r, normal = pt.random.normal(1.0, 2.0, size=(500,), rng=rng).owner.outputs
    r, gamma = pt.random.gamma(0.7, scale=1 / 1.5, size=(500,), rng=r).owner.outputs
    r, poisson = pt.random.poisson(np.array([3.0, 40.0]), size=(250, 2), rng=r).owner.outputs
    r, integers = pt.random.integers(-(2**62), 2**62, size=(500,), rng=r).owner.outputs
    fn = pytensor.function([], [normal, gamma, poisson, integers], updates={rng: r})
    export_onnx(fn, trained[3] / "model" / "random.onnx")

    state = state_from_generator(rng.get_value())
    session = ort.InferenceSession(str(trained[3] / "model" / "random.onnx"))
    expected = session.run(None, {"rng": state})
    got = page.evaluate(
        """async (state) => {
            const ort = await import('./ort/ort.wasm.min.mjs');
            const session = await ort.InferenceSession.create('model/random.onnx');
            const input = new ort.Tensor('uint64', BigUint64Array.from(state.map(BigInt)), [2]);
            const result = await session.run({ rng: input });
            return session.outputNames.map((name) => {
                const data = result[name].data;
                const bigint = data instanceof BigInt64Array || data instanceof BigUint64Array;
                return Array.from(data, (v) => (bigint ? v.toString() : v));
            });
        }""",
        [str(v) for v in state],
    )
    names = [o.name for o in session.get_outputs()]
    assert names[-1] == "rng_updated"
    for name, ours, theirs in zip(names, expected, got, strict=True):
        values = np.array(theirs, dtype=ours.dtype if ours.dtype.kind in "iu" else "float64")
        if ours.dtype.kind in "iu":
            np.testing.assert_array_equal(values, ours.ravel(), err_msg=name)
        else:  # log, cos, exp: libm's last bit may differ
            np.testing.assert_allclose(values, ours.ravel(), rtol=1e-13, err_msg=name)
    assert not page.errors


def _log_density_and_gradient():
    """A log-density of one float64 parameter vector and its gradient, in the forms PyMC's
    models export: a Student-t's gammaln terms (digamma in the gradient; both run domains
    under Ifs), group offsets read by index (an indexed increment in the gradient), a GP
    term (an 80 x 80 Cholesky by blocks and a triangular solve) and a CAR-like quadratic form
    of the offsets with a SciPy sparse adjacency matrix (pytensor.sparse's Dot: sums by
    ScatterElements, and by ScatterND for its sum with a dense matrix)."""
    import pytensor
    import pytensor.sparse as psp
    import pytensor.tensor as pt
    import scipy.sparse as sps
    from pytensor.tensor.linalg import solve_triangular

    rng = np.random.default_rng(3)
    group = rng.integers(0, 8, 60)
    y = rng.normal(size=60) + group / 4
    x = np.sort(rng.uniform(0, 10, 80))
    point = pt.vector("point")
    nu, mu, ls, offset = pt.exp(point[0]), point[1], pt.exp(point[2]), point[3:11]
    z = y - mu - offset[group]
    student_t = (
        pt.gammaln((nu + 1) / 2)
        - pt.gammaln(nu / 2)
        - 0.5 * pt.log(nu * np.pi)
        - (nu + 1) / 2 * pt.log1p(z**2 / nu)
    ).sum()
    k = pt.exp(-0.5 * ((x[:, None] - x[None, :]) / ls) ** 2) + 0.1 * np.eye(80)
    chol = pt.linalg.cholesky(k)
    alpha = solve_triangular(chol, np.sin(x), lower=True)
    gp = -0.5 * (alpha**2).sum() - pt.log(pt.diagonal(chol)).sum()
    adjacency = sps.csr_matrix(np.eye(8, k=1) + np.eye(8, k=-1) + np.eye(8, k=5) + np.eye(8, k=-5))
    row = offset[None, :]
    car = -0.5 * (row * psp.dot(row, adjacency)).sum()
    car -= 0.01 * psp.add(adjacency, pt.outer(offset, offset)).sum()
    logp = student_t + gp + car - 0.5 * (offset**2).sum()
    return [point], [logp, pytensor.grad(logp, point)]


def test_a_log_density_and_its_gradient_in_the_browser(trained, page):
    # float64 throughout: onnxruntime-web's wasm build runs what ONNX Runtime's CPU runs
    # (gammaln's and digamma's Ifs, Cholesky's blocks, ScatterElements' sums), libm's last
    # bits aside.
    import onnx
    import onnxruntime as ort

    from pt_onnxscript import export_onnx

    path = trained[3] / "model" / "logp.onnx"
    model = export_onnx(_log_density_and_gradient(), path)
    ops = {node.op_type for node in model.graph.node}
    assert {"If", "ScatterElements", "ScatterND"} <= ops, ops
    onnx.checker.check_model(str(path), full_check=True)
    points = [np.array([np.log(v), 0.3, np.log(ls)] + [0.1] * 8) for v, ls in [(4, 1.3), (0.7, 3)]]
    session = ort.InferenceSession(str(path))
    got = page.evaluate(
        """async (points) => {
            const ort = await import('./ort/ort.wasm.min.mjs');
            const session = await ort.InferenceSession.create('model/logp.onnx');
            const results = [];
            for (const point of points) {
                const feed = { point: new ort.Tensor('float64', Float64Array.from(point), [11]) };
                const result = await session.run(feed);
                results.push(session.outputNames.map((name) => Array.from(result[name].data)));
            }
            return results;
        }""",
        [p.tolist() for p in points],
    )
    for point, (logp, dlogp) in zip(points, got, strict=True):
        expected_logp, expected_dlogp = session.run(None, {"point": point})
        np.testing.assert_allclose(logp, [expected_logp], rtol=1e-12)
        np.testing.assert_allclose(dlogp, expected_dlogp, rtol=1e-12, atol=1e-12)
    assert not page.errors


def test_the_demo_fails_at_once_when_its_port_is_taken():
    import socket

    try:
        server.check_runtime()  # checked first: without it the demo names that instead
    except FileNotFoundError as err:
        pytest.skip(str(err))

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit, match=f"port {port} is not free.*--port"):
            digits.main(["--port", str(port)])  # before training: this returns at once


def test_a_connection_closed_by_the_browser_is_not_a_traceback(capsys):
    httpd = server.Server(("127.0.0.1", 0), server.Handler)
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError:
            httpd.handle_error(None, ("127.0.0.1", 1))
    finally:
        httpd.server_close()
    assert capsys.readouterr().err == ""


def _pad_blocks(page):
    """The pad averaged over its 32 x 32 blocks (what the model sees), grey levels 0-1."""
    return page.evaluate(
        """(() => {
            const pad = document.getElementById('pad');
            const data = pad.getContext('2d').getImageData(0, 0, 256, 256).data;
            const sums = new Array(64).fill(0);
            for (let y = 0; y < 256; y++) for (let x = 0; x < 256; x++)
                sums[8 * Math.floor(y / 32) + Math.floor(x / 32)] += data[4 * (y * 256 + x)];
            return sums.map((s) => s / (255 * 32 * 32));
        })()"""
    )


def test_a_picked_sample_is_drawn_on_the_pad_and_clear_resets_the_menu(trained, page):
    split = trained[0]
    page.select_option("#sample", "4")
    page.wait_for_function(
        f"document.getElementById('label').textContent === '(label {split.y_test[4]})'"
    )
    np.testing.assert_allclose(_pad_blocks(page), split.x_test[4].ravel(), atol=1 / 255)
    page.click("#clear")
    assert page.evaluate("document.getElementById('sample').value") == ""
    # The same sample again is a change: it is drawn and classified again.
    page.select_option("#sample", "4")
    page.wait_for_function("document.getElementById('label').textContent !== ''")
    assert max(_pad_blocks(page)) > 0


def test_the_page_fits_a_phone(page):
    """On a 390 x 844 screen nothing scrolls sideways, the pad shrinks to fit, and a stroke
    drawn on the shrunk pad lands where it is drawn."""
    size = page.viewport_size
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        box = page.locator("#pad").bounding_box()
        assert box["width"] <= 390 - 2 * 16 and abs(box["width"] - box["height"]) < 1
        page.click("#clear")
        x = box["x"] + box["width"] * 3 / 4  # a vertical stroke in the right half
        page.mouse.move(x, box["y"] + box["height"] * 0.2)
        page.mouse.down()
        for step in range(1, 11):
            page.mouse.move(x, box["y"] + box["height"] * (0.2 + 0.06 * step))
        page.mouse.up()
        page.wait_for_function("document.getElementById('prediction').textContent.match(/^[0-9]$/)")
        blocks = np.array(_pad_blocks(page)).reshape(8, 8)
        assert blocks[:, 5:7].sum() > 0 and blocks[:, :4].sum() == 0
    finally:
        page.set_viewport_size(size)
