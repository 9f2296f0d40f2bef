"""Every notebook in notebooks/ is committed with its outputs (so it reads on GitHub without
running it), still runs from top to bottom in the Python running the tests, and still prints
what it was committed with: its text outputs, but for decimal numbers (timings, errors of
1e-16, sampled values), equal the committed ones (node counts, shapes, names, messages)."""

import json
import re
import sys
from pathlib import Path

import nbformat
import pytensor
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))
# An absolute path (a directory and what follows it), not a URL's or a fraction's slashes.
ABSOLUTE_PATH = re.compile(r"(?<![\w.:</])/(?:[\w.-]+/)+[\w.-]*")
# What may change from run to run in a notebook's text: decimal numbers (timings, errors,
# draws) and the addresses in reprs.
VOLATILE = re.compile(r"-?\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|\d+x\b|0x[0-9a-f]+|nan|inf")


def printed(cell) -> list[str]:
    """The text a code cell printed (its stdout, however it was split into outputs, then
    its plain-text results), volatile numbers (timings, ratios of timings) masked and
    whitespace collapsed."""
    stdout = "".join(
        out.text for out in cell.outputs if out.output_type == "stream" and out.name == "stdout"
    )
    results = [
        str(out.get("data", {}).get("text/plain", ""))
        for out in cell.outputs
        if out.output_type in ("execute_result", "display_data")
        and "image/png" not in out.get("data", {})
    ]
    return [" ".join(VOLATILE.sub("#", text).split()) for text in [stdout, *results]]


@pytest.fixture
def kernel_manager(tmp_path):
    """A "python3" kernel running sys.executable, whatever kernels are installed."""
    spec_dir = tmp_path / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "Python 3", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(spec_dir.parent)], ensure_native_kernel=False)
    return KernelManager(kernel_name="python3", kernel_spec_manager=specs)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path, kernel_manager):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    # Committed as executed, top to bottom, without errors, and without what would churn the
    # diff on every run or mean nothing elsewhere (this machine's paths).
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), (
        "commit the notebook executed from top to bottom (Restart & Run All)"
    )
    assert any("image/png" in out.get("data", {}) for cell in code for out in cell.outputs)
    for cell in code:
        for out in cell.outputs:
            assert out.output_type != "error", cell.source
            text = out.get("text", "") + str(out.get("data", {}).get("text/plain", ""))
            local = ABSOLUTE_PATH.search(text) or re.search("site-packages", text)
            assert local is None, f"{local[0]!r} in the output of {cell.source[:60]!r}"
    for module in notebook.metadata.get("pt_onnxscript", {}).get("requires", []):
        pytest.importorskip(module)  # the committed outputs are checked above even so
    work = tmp_path / "cwd"  # the notebook runs here, away from the repository
    work.mkdir()
    client = NotebookClient(
        notebook,
        km=kernel_manager,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(work)}},
    )
    client.execute()
    # What it prints depends on the PyTensor line (its graphs' Op names): compared under the
    # line the notebook was committed with (its metadata's pt_onnxscript.pytensor).
    line = notebook.metadata.get("pt_onnxscript", {}).get("pytensor")
    assert line, "record the PyTensor line the outputs come from: metadata pt_onnxscript.pytensor"
    if not pytensor.__version__.startswith(line + "."):
        return
    fresh = [cell for cell in notebook.cells if cell.cell_type == "code"]
    committed = [
        cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
    ]
    for before, after in zip(committed, fresh, strict=True):
        assert printed(after) == printed(before), (
            f"{path.name}: the cell {before.source[:80]!r} prints something else now: "
            "run the notebook again and commit it (Restart & Run All)"
        )
