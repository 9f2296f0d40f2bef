"""Elemwise (broadcasting, fused Composites) and DimShuffle, against PyTensor's Python linker."""

import numpy as np
import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
import pytest
from pytensor.graph.fg import FunctionGraph
from pytensor.graph.op import Op
from pytensor.tensor.elemwise import DimShuffle, Elemwise

from pt_onnxscript.rewrites import dimshuffle_of_elemwise_computed
from pt_onnxscript.testing import compare_onnx_and_py


def ops_of(fn, op_class):
    return [node.op for node in fn.maker.fgraph.apply_nodes if isinstance(node.op, op_class)]


def composites(fn):
    return [op for op in ops_of(fn, Elemwise) if isinstance(op.scalar_op, ps.Composite)]


@pytest.mark.parametrize(
    "x_shape, y_shape, static",
    [
        ((3, 1), (1, 4), True),  # size-1 dims on both sides
        ((3, 4), (1, 4), False),  # unknown dims against a broadcastable one
        ((0, 3), (1, 3), True),  # empty
        ((0, 3), (0, 3), False),
        ((), (), True),  # 0-d
        ((2, 1, 3), (1, 5, 1), False),
    ],
)
def test_broadcasting(x_shape, y_shape, static, rng, opset):
    def var(name, shape):
        shape = shape if static else tuple(1 if d == 1 else None for d in shape)
        return pt.tensor(name, dtype="float64", shape=shape)

    x, y = var("x", x_shape), var("y", y_shape)
    values = [rng.normal(size=x_shape), rng.normal(size=y_shape)]
    compare_onnx_and_py([x, y], [x - y, pt.maximum(x, y), pt.lt(x, y)], values, opset=opset)


def test_scalar_against_tensor(rng):
    a = pt.scalar("a", dtype="int16")
    b = pt.scalar("b", dtype="uint8")
    x = pt.tensor3("x", dtype="float32")
    values = [
        np.array(-3, "int16"),
        np.array(2, "uint8"),
        rng.normal(size=(2, 0, 3)).astype("float32"),
    ]
    compare_onnx_and_py([a, b, x], [a * x, a // b, x > a], values)
    values[2] = rng.normal(size=(2, 1, 3)).astype("float32")
    compare_onnx_and_py([a, b, x], [a * x, x > a], values)


def test_zero_d_constant():
    a = pt.scalar("a", dtype="int16")
    compare_onnx_and_py([a], a // 2, [np.array(-3, "int16")])


def test_fused_composite(rng, opset):
    """FAST_RUN fuses the elementwise graph into Composites, inner constants included."""
    x = pt.matrix("x")
    y = pt.vector("y", dtype="float32")
    out = pt.sqrt(pt.abs(x * y + 2.5)) / (2 + pt.cos(x)) - pt.sqr(pt.floor(y)) % 3
    values = [rng.normal(size=(3, 4)), rng.normal(size=4).astype("float32")]
    fn, _ = compare_onnx_and_py([x, y], out, values, opset=opset)
    assert composites(fn)


def test_fused_composite_with_several_outputs(rng):
    x = pt.vector("x")
    y = pt.vector("y")
    z = x * y + 1
    outs = [pt.exp(z), pt.log(pt.abs(z)), pt.switch(z > 0, x, y)]
    fn, _ = compare_onnx_and_py([x, y], outs, [rng.normal(size=5), rng.normal(size=5)])
    assert len(composites(fn)) == 1
    assert composites(fn)[0].scalar_op.nout == 3


def test_fused_composite_mixed_dtypes(opset):
    """Integer and float inputs meet inside one Composite, each op in its upcast dtype."""
    i = pt.vector("i", dtype="int8")
    u = pt.vector("u", dtype="uint16")
    f = pt.vector("f", dtype="float32")
    b = pt.vector("b", dtype="bool")
    out = pt.switch(b, (i * u) // 3 + f, (i % 5) ** 2 - u)
    values = [
        np.array([-128, -3, 0, 7, 127], "int8"),
        np.array([0, 1, 65535, 300, 7], "uint16"),
        np.array([0.5, -1.5, 2.0, np.nan, -0.0], "float32"),
        np.array([True, False, True, False, True]),
    ]
    fn, _ = compare_onnx_and_py([i, u, f, b], out, values, opset=opset)
    assert composites(fn)


def test_composite_output_not_using_every_input():
    """An output still takes the broadcast shape of all the Composite's inputs."""
    a, b = ps.float64(), ps.float64()
    c = ps.Composite([a, b], [ps.exp(a), a + b, ps.float64.filter(2.0) + a * 0])
    x = pt.tensor("x", dtype="float64", shape=(1, 3))
    y = pt.tensor("y", dtype="float64", shape=(4, 1))
    outs = Elemwise(c)(x, y)
    assert all(out.type.shape == (4, 3) for out in outs)
    compare_onnx_and_py([x, y], outs, [np.ones((1, 3)), np.ones((4, 1))])


def test_composite_with_constant_output():
    a = ps.int32()
    c = ps.Composite([a], [a + 1, ps.constant(np.int32(7))])
    x = pt.vector("x", dtype="int32")
    compare_onnx_and_py([x], Elemwise(c)(x), [np.arange(4, dtype="int32")])


@pytest.mark.parametrize(
    "shape, new_order",
    [
        ((2, 3, 4), (2, 0, 1)),  # transpose
        ((2, 3), (1, 0)),
        ((2, 3), ("x", 0, "x", 1)),  # expand
        ((2, 3), (0, 1, "x")),
        ((), ("x", "x")),
        ((3, 1, 4), (0, 2)),  # drop a broadcastable dim
        ((3, 1, 4), (2, 0)),  # drop and transpose
        ((1, 3, 1, 4), ("x", 3, "x", 1)),  # drop, transpose and expand
        ((1, 1), ()),
    ],
)
def test_dimshuffle(shape, new_order, rng, opset):
    x = pt.tensor("x", dtype="float64", shape=tuple(1 if d == 1 else None for d in shape))
    y = pt.tensor("y", dtype="float64", shape=(None,) * len(new_order))
    out = DimShuffle(input_ndim=x.ndim, new_order=new_order)(x) * y
    y_value = np.ones([1 if d == "x" else shape[d] for d in new_order])
    compare_onnx_and_py([x, y], out, [rng.normal(size=shape), y_value], opset=opset)


def test_dimshuffle_keeps_integer_dtype():
    x = pt.tensor("x", dtype="uint8", shape=(None, 1, None))
    out = x.dimshuffle(2, "x", 0) + pt.constant(np.uint8(1))
    compare_onnx_and_py([x], out, [np.arange(6, dtype="uint8").reshape(2, 1, 3)])


def test_runtime_broadcasting_raises_like_pytensor():
    import pytensor

    v1, v2 = pt.vector("v1"), pt.vector("v2")
    m = pt.matrix("m")
    row = pt.tensor("row", shape=(1, None))
    fn = pytensor.function([v1, v2, m, row], [v1 + v2, m * row], mode="ONNX")
    good = fn(np.ones(3), np.ones(3), np.ones((2, 3)), np.ones((1, 3)))
    np.testing.assert_array_equal(good[0], 2 * np.ones(3))
    for args in [
        (np.ones(3), np.ones(1), np.ones((2, 3)), np.ones((1, 3))),
        (np.ones(1), np.ones(3), np.ones((2, 3)), np.ones((1, 3))),
        (np.ones(3), np.ones(3), np.ones((2, 3)), np.ones((1, 1))),
        (np.ones(3), np.ones(3), np.ones((2, 1)), np.ones((1, 3))),
    ]:
        with pytest.raises(ValueError, match="Runtime broadcasting not allowed"):
            fn(*args)
    # Length 1 everywhere, and empty dims, are fine, as in PyTensor.
    ones = fn(np.ones(1), np.ones(1), np.ones((0, 1)), np.ones((1, 1)))
    assert ones[0].shape == (1,) and ones[1].shape == (0, 1)


def test_runtime_broadcasting_of_a_baked_weight_is_refused_and_a_matching_one_adds_no_check():
    import pytensor

    from pt_onnxscript import export_onnx

    x = pt.matrix("x", shape=(None, 3))
    fits = pytensor.shared(np.ones(3), name="fits")
    model = export_onnx(([x], [x + fits]))
    assert {n.op_type for n in model.graph.node} <= {"Add", "Unsqueeze", "Constant"}
    one = pytensor.shared(np.ones(1), name="one")
    fn = pytensor.function([x], x + one, mode="ONNX")
    with pytest.raises(ValueError, match="Runtime broadcasting not allowed"):
        fn(np.ones((2, 3)))
    with pytest.raises(ValueError, match="Runtime broadcasting not allowed"):
        pytensor.function([x], x + one, mode=pytensor.compile.mode.Mode(linker="py"))(
            np.ones((2, 3))
        )
    # Mode "ONNX" bakes the length-1 value as an initializer of an input PyTensor types as
    # any length, not as a PyTensor constant (which would broadcast): the check stays.
    # (export_onnx's shared="bake" makes it a constant, with a constant's semantics.)
    assert [value.name for value in fn.vm.jit_fn.model.graph.inputs] == ["x"]


def test_values_sized_by_the_same_input_dim_add_no_check(rng):
    """Two branches of a network both have x's rows; a matrix and its rows share x's columns:
    their sizes are equal at run time, so adding them needs no runtime-broadcasting check
    (one Add, not 20 nodes of Shape, Gather, Equal and Expand)."""
    import pytensor

    from pt_onnxscript import export_onnx

    x = pt.matrix("x", shape=(None, 3))
    w, v = (pytensor.shared(rng.normal(size=(3, 3)), name=name) for name in "wv")
    outs = [pt.maximum(x @ w, 0) + pt.tanh(x @ v), x[0] + x[1], pt.exp(x) - x]
    model = export_onnx(([x], outs))
    ops = sorted(node.op_type for node in model.graph.node)
    assert ops == [
        *("Add", "Add", "Exp", "Gather", "Gather", "MatMul", "MatMul", "Relu", "Sub", "Tanh")
    ]
    compare_onnx_and_py([x], outs, [rng.normal(size=(4, 3))], more_inputs=[[np.ones((2, 3))]])


def test_a_fused_output_is_expanded_only_by_inputs_that_can_grow_it(rng):
    """A fused Composite's output that does not read an input is expanded by its shape only
    where that input has a dim the output's own inputs broadcast: exp(x) + 1 beside
    exp(x) * y, y the size of x (a row-reversed x), needs no Shape and Expand."""
    x = pt.matrix("x", shape=(None, 3))
    a = pt.exp(x)
    outs = [a * (x[::-1] * 2), a + 1]
    compare_onnx_and_py([x], outs, [rng.normal(size=(4, 3))], forbidden_ops=["Expand", "Shape"])
    # A row or a column still expands to the full shape, as Elemwise gives it.
    r, c = pt.matrix("r", shape=(1, None)), pt.matrix("c", shape=(None, 1))
    b = pt.exp(r)
    outs = [b * c, pt.log1p(b) + c, (b + 1) * pt.ones_like(c)]
    compare_onnx_and_py([r, c], outs, [rng.normal(size=(1, 3)), rng.normal(size=(2, 1))])


def test_a_switch_taking_a_value_that_cannot_be_negative_zero_needs_no_sign_repair():
    """ONNX Runtime's Where turns a -0.0 taken from its first branch into +0.0, so a switch
    repairs the sign (ten elementwise nodes) unless that branch cannot hold -0.0: a
    logistic's probability, exp(x) + 1, |x|, sqrt(2 exp(x)) (a Bernoulli log-density's
    switch on its observed values, over every point and observation of a batch)."""
    from pt_onnxscript import export_onnx

    x = pt.matrix("x", shape=(2, 4))
    c = pt.matrix("c", shape=(2, 4), dtype="bool")
    outs = [
        pt.switch(c, pt.sigmoid(x), -x),
        pt.switch(c, pt.exp(x) + 1, -x),
        pt.switch(c, -x, pt.abs(x)),
        pt.switch(c, pt.sqrt(pt.exp(x) * 2), x),
    ]
    xv = np.array([[0.0, -0.0, 3.0, -800.0], [np.inf, -np.inf, np.nan, 1e-300]])
    cv = np.array([[True, False, True, True], [False, True, True, False]])
    compare_onnx_and_py([x, c], outs, [xv, cv], more_inputs=[[xv, ~cv]])
    for out in outs:
        ops = [n.op_type for n in export_onnx(([x, c], [out])).graph.node]
        assert ops.count("Where") == 1 and "Less" not in ops and "Greater" not in ops, ops
    # A branch that may hold -0.0 keeps the repair: -x of x = 0.0.
    ops = [n.op_type for n in export_onnx(([x, c], [pt.switch(c, -x, x * 2)])).graph.node]
    assert "Less" in ops


def test_a_dim_name_given_to_several_inputs_keeps_the_check():
    """The user's `dims` naming both vectors' length "n" says they should be equal, not that
    they are: a length-1 vector added to a longer one still raises, as in PyTensor."""
    import onnxruntime as ort

    from pt_onnxscript import export_onnx

    a, b = pt.vector("a"), pt.vector("b")
    model = export_onnx(([a, b], [a + b]), dims={"a": ("n",), "b": ("n",)})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="Runtime broadcasting not allowed"):
        session.run(None, {"a": np.ones(1), "b": np.ones(5)})
    np.testing.assert_array_equal(session.run(None, {"a": np.ones(5), "b": np.ones(5)})[0], 2.0)


@pytest.mark.parametrize("read", ["squeezed slice", "index"])
def test_one_value_dimshuffled_before_and_after_an_elemwise_is_computed_once(read, rng, opset):
    """exp(eta)[None, None] and exp(eta[None, None]), with eta read from a vector as v[1] or
    v[1:2] squeezed (as a PyMC log-density and its gradient read a scale): one value, so
    what reads them, a Cholesky each here, is computed once."""
    v = pt.vector("v", shape=(3,))
    eta = v[1] if read == "index" else v[1:2].squeeze(0)
    k = np.eye(4) + 0.5
    outputs = [
        pt.exp(eta),
        pt.linalg.cholesky(k * pt.exp(eta)[None, None]),
        pt.linalg.cholesky(k * pt.exp(v[1:2].dimshuffle("x", "x"))),
    ]
    fn, _ = compare_onnx_and_py([v], outputs, [rng.normal(size=3)], opset=opset)
    factored = [op for op in ops_of(fn, Op) if "Cholesky" in str(op)]
    assert len(factored) == 1


def test_a_transposed_elemwise_with_a_constant_is_found_computed(rng):
    """(c * exp(m)).T, its Elemwise also read untransposed, is the c.T * exp(m.T) the graph
    computes (constant folded): one product, one Dot."""
    m = pt.matrix("m", shape=(3, 4))
    w = pt.vector("w", shape=(3,))
    c = rng.normal(size=(3, 4))
    product = c * pt.exp(m)
    outputs = [product, pt.dot(product.T, w), pt.dot(pt.constant(c.T) * pt.exp(m.T), w)]
    fn, _ = compare_onnx_and_py([m, w], outputs, [rng.normal(size=(3, 4)), rng.normal(size=3)])
    dots = [node for node in fn.maker.fgraph.apply_nodes if "Dot" in type(node.op).__name__]
    assert len(dots) == 1


def test_an_elemwise_of_other_arity_reading_the_dimshuffles_is_not_a_match(rng):
    """Looking for a computed (a + b)[None], an Add of three inputs that reads a[None] and
    b[None] is not it (the lookup compared the inputs pairwise and raised inside PyTensor's
    rewriter: a logged traceback, and with on_opt_error="raise" a failed compilation, as
    for `pt.pad(x, 1, mode="mean")`, whose inner graph adds shapes both ways)."""
    a, b, c = pt.dscalar("a"), pt.dscalar("b"), pt.dscalar("c")
    target = pt.add(a, b)[None]
    three = pt.add(a[None], b[None], c[None])
    fgraph = FunctionGraph([a, b, c], [target, three], clone=False)
    assert dimshuffle_of_elemwise_computed.transform(fgraph, target.owner) is False

    x = pt.matrix("x")
    with pytensor.config.change_flags(on_opt_error="raise"):
        compare_onnx_and_py([x], pt.pad(x, 1, mode="mean"), [rng.normal(size=(3, 4))])
