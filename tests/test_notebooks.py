"""Every notebook in notebooks/ runs from top to bottom, in the Python running the tests."""

import json
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


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
    for module in notebook.metadata.get("pt_onnxscript", {}).get("requires", []):
        pytest.importorskip(module)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "clear the outputs"
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
