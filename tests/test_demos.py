"""The README's first command, the classifier demo, as a user runs it."""

import subprocess
import sys


def _demo(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pt_onnxscript.demos.classifier", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout


def test_the_classifier_demo_exports_and_agrees(tmp_path):
    out = _demo(str(tmp_path / "model.onnx"), cwd=tmp_path)
    assert (tmp_path / "model.onnx").exists()
    assert "batch  256: ONNX Runtime vs PyTensor max abs diff" in out
    assert "@onnx_export: classify(x).shape = (3, 10)" in out


def test_the_classifier_demos_help_writes_nothing(tmp_path):
    out = _demo("--help", cwd=tmp_path)
    assert "usage:" in out and "output" in out
    assert list(tmp_path.iterdir()) == []
