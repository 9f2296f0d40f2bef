import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pt_onnxscript.linker import onnx_mode
from pt_onnxscript.testing import assert_same, compare_onnx_and_py


# (NumPy's cumsum of small ints gives int64, which PyTensor's Python implementation returns for their
# output: a PyTensor inconsistency, so small integers are left out of this comparison.)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_cumsum_cumprod(dtype, rng, opset):
    x = pt.tensor3("x", dtype=dtype)
    outs = [
        pt.cumsum(x, axis=1),
        pt.cumsum(x),
        pt.cumprod(x, axis=0),
        pt.cumprod(x, axis=-1),
        pt.cumprod(x),
    ]
    value = (rng.normal(size=(2, 3, 4)) * 3).astype(dtype)
    compare_onnx_and_py([x], outs, [value], opset=opset)
    compare_onnx_and_py([x], outs, [np.zeros((2, 0, 4), dtype)], opset=opset)


@pytest.mark.parametrize("axis", [0, 1, None])
def test_cumsum_cumprod_of_bool_are_running_or_and(axis, rng, opset):
    """PyTensor types the cumulative sum and product of bools bool: a running OR and a running
    AND, as its C linker computes them (its Python linker returns NumPy's int64 counts in the
    bool-typed output). Both raised before (no sum; a product that failed the ONNX check)."""
    x = pt.matrix("x", dtype="bool")
    outs = [pt.cumsum(x, axis=axis), pt.cumprod(x, axis=axis)]
    fn = pytensor.function([x], outs, mode=onnx_mode(opset))
    for value in (rng.random((4, 5)) > 0.6, np.ones((3, 2), bool), np.zeros((0, 3), bool)):
        flat = value if axis is not None else value.ravel()
        along = 0 if axis is None else axis
        running_or = np.logical_or.accumulate(flat, axis=along)
        running_and = np.logical_and.accumulate(flat, axis=along)
        total, product = fn(value)
        assert_same(total, running_or)
        assert_same(product, running_and)


def test_repeat(rng):
    x = pt.matrix("x")
    r = pt.lvector("r")
    k = pt.lscalar("k")
    outs = [
        pt.repeat(x, r, axis=0),
        pt.repeat(x, k, axis=1),
        pt.repeat(x, 2),
        pt.repeat(x, k, axis=-1),
    ]
    for repeats in [[0, 2, 1], [3, 0, 0], [0, 0, 0]]:
        compare_onnx_and_py(
            [x, r, k], outs, [rng.normal(size=(3, 2)), np.array(repeats), np.array(2)]
        )
    compare_onnx_and_py(
        [x, r, k], outs, [rng.normal(size=(3, 2)), np.array([1, 1, 1]), np.array(0)]
    )


def test_repeat_of_one_or_bad_repeats_as_numpy(rng):
    """One repeat applies to every element (it repeated the first element only); repeats of
    another length than the axis's, or negative ones, raise NumPy's ValueError (they gave
    short or shuffled results)."""
    x = pt.matrix("x")
    r = pt.lvector("r")
    outs = [pt.repeat(x, r, axis=0), pt.repeat(x, r, axis=1), pt.repeat(x, r)]
    compare_onnx_and_py([x, r], outs, [rng.normal(size=(3, 2)), np.array([2])])
    fn = pytensor.function([x, r], outs[0], mode=onnx_mode())
    assert fn(np.zeros((0, 2)), np.array([3])).shape == (0, 2)
    for bad in [[1, 2], [1, -1, 2], [1, 0, 2, 1]]:
        with pytest.raises(ValueError, match="repeats must be one, or one per element"):
            fn(rng.normal(size=(3, 2)), np.array(bad))


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(side):
    x = pt.vector("x")
    v = pt.matrix("v")
    s = pt.lvector("s")
    outs = [
        pt.searchsorted(x, v, side=side),
        pt.searchsorted(x[s], v, side=side, sorter=pt.argsort(x[s])),
    ]
    xv = np.array([-np.inf, -1.0, 0.0, 0.0, 2.0, np.inf, np.nan, np.nan])
    vv = np.array([[-np.inf, -2.0, 0.0, -0.0], [2.0, 3.0, np.inf, np.nan]])
    compare_onnx_and_py([x, v, s], outs, [xv, vv, np.array([3, 1, 0, 4, 7, 6, 5, 2])])


@pytest.mark.parametrize("dtype", ["float64", "int64", "bool"])
def test_searchsorted_of_many_x_by_binary_search(dtype, rng):
    """Beyond a few x (static), or where their number is known only at run time, each v is
    found by binary search: comparing every v with every x took 3 s and a (len(v), len(x))
    array at 1,000 x and 100,000 v. Lengths around powers of two and 0, repeats, both sides;
    NaN and infinities in float64 (the existing test's, at a symbolic length); bools (ONNX
    Runtime compares none: the model failed ONNX's check)."""
    x = pt.vector("x", dtype=dtype)
    fixed = pt.vector("fixed", dtype=dtype, shape=(40,))
    v = pt.matrix("v", dtype=dtype)
    outs = [pt.searchsorted(a, v, side=side) for a in (x, fixed) for side in ("left", "right")]

    low, high = (0, 2) if dtype == "bool" else (-20, 20)

    def inputs(n):
        values = rng.integers(low, high, size=n).astype(dtype)
        if dtype == "float64" and n > 3:
            values[:3] = [-np.inf, np.nan, np.inf]
        fixed_values = np.sort(rng.integers(low, high, 40)).astype(dtype)
        return [np.sort(values), fixed_values, values[:, None]]

    first, *more = [inputs(n) for n in (17, 0, 1, 2, 3, 7, 8, 9, 16, 33, 64)]
    more.append([first[0], first[1], np.arange(-25, 25).astype(dtype).reshape(5, 10)])
    compare_onnx_and_py(
        [x, fixed, v], outs, first, more_inputs=more, expected_ops=["Loop", "GatherElements"]
    )


def test_fill_diagonal(rng):
    a = pt.matrix("a")
    v = pt.scalar("v")
    k = pt.lscalar("k")
    outs = [pt.fill_diagonal(a, v), pt.fill_diagonal_offset(a, v, k)]
    for shape, offset in [((3, 5), 2), ((5, 3), -1), ((4, 4), 0)]:
        compare_onnx_and_py(
            [a, v, k], outs, [rng.normal(size=shape), np.array(7.0), np.array(offset)]
        )


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_unique(axis):
    x = pt.matrix("x")
    outs = pt.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    value = np.array([[3.0, 1.0, 3.0], [1.0, -0.0, 2.0], [3.0, 1.0, 3.0]])
    compare_onnx_and_py([x], list(outs) + [pt.unique(x, axis=axis)], [value])
    if axis is None:
        value = np.array([[np.nan, 1.0, np.inf], [np.nan, 1.0, -np.inf], [0.0, np.nan, np.inf]])
        compare_onnx_and_py([x], list(outs), [value])


def test_unique_of_integers():
    x = pt.vector("x", dtype="int32")
    outs = pt.unique(x, return_index=True, return_inverse=True, return_counts=True)
    compare_onnx_and_py([x], list(outs), [np.array([5, -1, 5, 0, -1], "int32")])


@pytest.mark.parametrize("order", ["C", "F"])
def test_unravel_and_ravel_index(order, rng):
    """unravel_index and ravel_multi_index as NumPy's, with symbolic dims, empty indices and
    broadcast coordinates."""
    from pytensor.tensor.extra_ops import ravel_multi_index, unravel_index

    indices, middle = pt.tensor("i", dtype="int32", shape=(None, None)), pt.lscalar("d")
    cases = [
        [rng.integers(0, 24, size=(3, 4)).astype("int32"), np.array(3)],
        [np.zeros((0, 2), "int32"), np.array(3)],
        [np.full((1, 1), 5, "int32"), np.array(6)],
    ]
    coordinates = unravel_index(indices, (2, middle, 4), order=order)
    compare_onnx_and_py([indices, middle], coordinates, cases[0], more_inputs=cases[1:])
    i, j, k = pt.lmatrix("i"), pt.lvector("j"), pt.lscalar("k")
    values = [rng.integers(-3, 6, size=(2, 3)), rng.integers(-2, 5, size=3), np.array(7)]
    for mode in ("wrap", "clip"):
        flat = ravel_multi_index((i, j, k), (4, 3, 5), mode=mode, order=order)
        compare_onnx_and_py([i, j, k], flat, values)
    flat = ravel_multi_index((i, j, k), (4, 3, 9), order=order)
    inside = [np.abs(values[0]) % 4, np.abs(values[1]) % 3, np.array(7)]
    fn, _ = compare_onnx_and_py([i, j, k], flat, inside)
    with pytest.raises(ValueError, match="invalid entry in coordinates array"):
        fn(*values)


def test_unravel_index_out_of_bounds_raises():
    from pytensor.tensor.extra_ops import unravel_index

    indices = pt.lvector("i")
    fn = pytensor.function([indices], unravel_index(indices, (2, 3)), mode="ONNX")
    np.testing.assert_array_equal(fn(np.array([0, 5]))[1], [0, 2])
    for bad in ([6], [-1], [0, 7]):
        with pytest.raises(ValueError, match="index out of bounds in unravel_index"):
            fn(np.array(bad))


def test_bartlett_and_cpu_contiguous(rng):
    from pytensor.tensor.extra_ops import bartlett, cpu_contiguous

    m = pt.lscalar("m")
    compare_onnx_and_py(
        [m], bartlett(m), [np.array(5)], more_inputs=[[np.array(v)] for v in (-2, 0, 1, 2, 12)]
    )
    x = pt.matrix("x")
    compare_onnx_and_py([x], cpu_contiguous(x.T), [rng.normal(size=(3, 2))])
