"""`import pt_onnxscript` is light (mode "ONNX" registered, nothing heavy imported) and the
translations, loaded at first use, are all there whichever way in comes first."""

import subprocess
import sys
import textwrap

import pytest

HEAVY = ("onnx", "onnx_ir", "onnxscript", "onnxruntime", "scipy", "sympy")


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_import_registers_the_mode_and_imports_nothing_heavy():
    out = _run(
        f"""
        import sys
        import pytensor.tensor  # what PyTensor itself loads (2.38 loads SciPy) does not count
        before = set(sys.modules)
        import pt_onnxscript
        from pytensor.compile.mode import get_mode
        assert get_mode("ONNX").linker.__class__.__name__ == "ONNXLinker"
        new = set(sys.modules) - before
        loaded = sorted(m for m in new if m.split(".")[0] in {HEAVY!r})
        print(loaded, "pt_onnxscript.ops" in sys.modules)
        """
    )
    assert out.split() == ["[]", "False"]


@pytest.mark.parametrize(
    "first",
    [
        # mode "ONNX" first: a special function (scalar translations) and a Scan
        """
        import numpy as np, pytensor, pytensor.tensor as pt
        x = pt.vector("x")
        ys, _ = pytensor.scan(lambda v, acc: acc + pt.gammaln(v), sequences=[x], outputs_info=[pt.zeros(())])
        f = pytensor.function([x], ys[-1], mode="ONNX")
        print(round(float(f(np.array([3.0, 4.0]))), 6))
        """,
        # export first, through the lazily imported name
        """
        import numpy as np, pytensor.tensor as pt, onnxruntime as ort
        from pt_onnxscript import export_onnx
        x = pt.vector("x")
        model = export_onnx(([x], pt.gammaln(x).sum()), None)
        sess = ort.InferenceSession(model.SerializeToString())
        print(round(float(sess.run(None, {"x": np.array([3.0, 4.0])})[0]), 6))
        """,
    ],
    ids=["mode", "export"],
)
def test_translations_load_at_first_use(first):
    out = _run("import pt_onnxscript\n" + textwrap.dedent(first))
    assert out.strip() == "2.484907"  # log(2) + log(6)


def test_a_users_registration_meets_the_packages_own():
    # Registering before anything has been translated still finds the package's translation
    # of the same Op (an accidental duplicate), and replace=True still overrides it.
    out = _run(
        """
        import numpy as np, pytensor, pytensor.tensor as pt
        from pytensor.tensor.math import Argmax
        import pt_onnxscript
        try:
            pt_onnxscript.register(Argmax)(lambda g, node, x: x)
        except ValueError as err:
            print("refused:", "replace=True" in str(err))
        pt_onnxscript.register(Argmax, replace=True)(lambda g, node, x: g.ArgMin(x, axis=0, keepdims=0))
        x = pt.vector("x")
        f = pytensor.function([x], pt.argmax(x), mode="ONNX")
        print(int(f(np.array([3.0, 1.0, 2.0]))))
        """
    )
    assert out.split() == ["refused:", "True", "1"]


def test_pymc_is_imported_only_for_its_own_ops():
    """The translations of PyMC's Ops load when the first one is met: an export without any
    does not import PyMC; a PyMC Op met after the package's translations loaded still finds
    its translation."""
    pytest.importorskip("pymc")
    out = _run(
        """
        import sys, numpy as np, pytensor, pytensor.tensor as pt
        import pt_onnxscript
        x = pt.dmatrix("x")
        pytensor.function([x], pt.linalg.cholesky(x), mode="ONNX")
        print("pymc" in sys.modules)
        from pymc.distributions.multivariate import matrix_pos_def
        f = pytensor.function([x], matrix_pos_def(x), mode="ONNX")
        print(bool(f(np.eye(2))), bool(f(np.array([[1.0, 2.0], [2.0, 1.0]]))))
        """
    )
    assert out.split() == ["False", "True", "False"]


def test_sparse_translations_load_when_a_sparse_op_is_met():
    """pytensor.sparse (which PyTensor 3 does not import) is imported by the translations of
    its Ops only when a graph holds one."""
    out = _run(
        """
        import sys, numpy as np, pytensor, pytensor.tensor as pt
        import pt_onnxscript
        x = pt.dvector("x")
        pytensor.function([x], pt.exp(x), mode="ONNX")
        print("pt_onnxscript.ops.sparse" in sys.modules)
        import scipy.sparse as sps, pytensor.sparse as psp
        f = pytensor.function([x], psp.dot(sps.eye(2, format="csr"), x), mode="ONNX")
        print(f(np.array([1.0, 2.0])).tolist() == [1.0, 2.0])
        """
    )
    assert out.split() == ["False", "True"]


def test_scripted_functions_are_converted_at_their_first_use():
    """onnxscript converts a scripted function from its source; the translations' ~125 are
    converted when a graph first needs them, not all at the first export (~0.65 s). A
    function converts the scripted functions it calls (gammaln: its positive branch, the
    sine of its reflection, the test for a branch some element takes)."""
    out = _run(
        """
        import sys, numpy as np, onnxscript, pytensor.tensor as pt
        from pt_onnxscript import export_onnx
        from pt_onnxscript.scripted import Scripted

        def converted():
            names = set()
            for name, module in list(sys.modules.items()):
                if name.startswith("pt_onnxscript.ops"):
                    for value in vars(module).values():
                        if isinstance(value, onnxscript.OnnxFunction):
                            names.add(value.name)
                        elif isinstance(value, Scripted) and value._converted is not None:
                            names.add(value.__name__)
            return sorted(names)

        x = pt.dvector("x")
        export_onnx(([x], [pt.exp(x) + 1]))
        print(converted())
        export_onnx(([x], [pt.gammaln(x)]))
        print(converted())
        """
    )
    assert out.splitlines() == [
        "[]",
        "['_lgamma_positive', '_sin_small', '_some', 'gammaln']",
    ]
