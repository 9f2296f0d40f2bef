"""Translations, one module per PyTensor op family; importing this registers them all."""

from pt_onnxscript.ops import (  # noqa: F401
    basic,
    blas,
    blockwise,
    compile,
    decompositions,
    elemwise,
    extra_ops,
    ifelse,
    linalg,
    math,
    matrix_functions,
    raise_op,
    random,
    scalar,
    scan,
    shape,
    signal,
    sort,
    special,
    subtensor,
)
