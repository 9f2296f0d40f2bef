"""xtensor (pytensor.xtensor, tensors with named dims): PyTensor's rewrites lower its Ops to
tensor Ops between casts from and to tensors, which translate to Identity; its variables
are graph inputs and outputs like tensors."""

import warnings

import numpy as np
import pytensor
import pytest

from pt_onnxscript import export_onnx
from pt_onnxscript.testing import compare_onnx_and_py

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # 2.38: "xtensor module is experimental"
    import pytensor.xtensor as px


def test_named_dim_ops_against_the_python_linker(rng):
    x = px.xtensor("x", dims=("a", "b"))
    y = px.xtensor("y", dims=("b", "c"))
    i = px.xtensor("i", dims=("k",), dtype="int64")
    outs = [
        px.math.exp(x).sum("a") + y.sum("c"),
        (x * 2).transpose("b", "a"),
        px.dot(x, y, dim="b"),
        x.isel(a=i, b=i),
        px.concat([x, x], dim="a"),
        x.stack({"ab": ("a", "b")}),
        px.math.where(x > 0, x, 0).var(("a", "b")),
        px.math.exp(x).cumsum("b"),
    ]
    compare_onnx_and_py(
        [x, y, i],
        outs,
        [rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), np.array([2, 0, 2])],
        more_inputs=[[rng.normal(size=(1, 3)), rng.normal(size=(3, 0)), np.array([0])]],
    )


def test_exported_with_a_random_draw(rng):
    x = px.xtensor("x", dims=("a", "b"))
    generator = pytensor.shared(np.random.default_rng(1))
    fn = pytensor.function([x], px.random.normal(x, 1.0, rng=generator), mode="ONNX")
    draws = fn(np.zeros((3, 4)))
    assert draws.shape == (3, 4) and np.all(np.isfinite(draws)) and np.std(draws) > 0
    model = export_onnx(pytensor.function([x], px.math.sqrt(x).sum("b")))
    assert [d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim] == [
        "x_dim0",
        "x_dim1",
    ]


def test_data_array_inputs_in_their_own_dim_order(rng):
    xr = pytest.importorskip("xarray")
    x = px.xtensor("x", dims=("a", "b"))
    fn = pytensor.function([x], x.sum("b"), mode="ONNX")
    values = rng.normal(size=(3, 4))
    np.testing.assert_allclose(fn(xr.DataArray(values.T, dims=("b", "a"))), values.sum(1))


def test_an_output_that_folds_to_a_constant_xtensor():
    # PyTensor folds it to an xtensor constant, which the walker took for a non-tensor one:
    # its output's Identity had no input (an IndexError, in mode "ONNX" and export alike).
    x = px.xtensor("x", dims=("a",))
    constant = px.as_xtensor(pytensor.tensor.as_tensor(np.arange(3.0)), dims=("a",)) * 2
    fn = pytensor.function([x], [constant, x.sum("a")], mode="ONNX")
    got = fn(np.ones(3))
    np.testing.assert_array_equal(got[0], [0.0, 2.0, 4.0])
    model = export_onnx(pytensor.function([], constant))
    assert [init.dims for init in model.graph.initializer] == [[3]]
