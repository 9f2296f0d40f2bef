"""Rules the scripted onnxscript functions must follow, which nothing else checks.

- A Python float literal in a scripted function becomes a float32 constant: an inexact one
  (0.1, Euler's constant, ...) silently loses digits in float64 code. Inexact constants come
  from float64 NumPy arrays (``pt_onnxscript.ops.scalar.constants``); literals must be exact
  in float32.
- ``Cast(..., to=...)`` names its dtype (``to=DOUBLE.dtype``, ``to=ir.DataType.INT64``), never
  a bare ONNX code such as ``to=11``.
- A parameter's type has a shape: ``DOUBLE[...]``. A bare ``DOUBLE`` declares a scalar, and
  inlining gives the argument that shape: the values computed from a cast to float16 were
  0-d to ONNX's inference, and a sum over them failed in mode "ONNX".
"""

import ast
from pathlib import Path

import numpy as np
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pt_onnxscript"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "node_modules" not in p.parts)


def _is_script(function: ast.FunctionDef) -> bool:
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "script":
            return True
    return False


def _scripted_functions(path: Path):
    tree = ast.parse(path.read_text())
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _is_script(n)]


def _inexact_literals(function: ast.FunctionDef) -> list[str]:
    found = []
    for node in ast.walk(function):
        if isinstance(node, ast.Constant) and type(node.value) is float:
            value = node.value
            if not np.isnan(value) and float(np.float32(value)) != value:
                found.append(f"line {node.lineno}: {value!r}")
    return found


def _integer_casts(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "to" and isinstance(keyword.value, ast.Constant):
                    found.append(f"line {node.lineno}: to={keyword.value.value!r}")
    return found


# onnxscript's tensor types (a TypeVar such as TFloat has no shape, and is a tensor of any).
TENSOR_TYPES = {
    "BOOL",
    "DOUBLE",
    "FLOAT",
    "FLOAT16",
    "BFLOAT16",
    *(f"{sign}INT{bits}" for sign in ("", "U") for bits in (8, 16, 32, 64)),
}


def _scalar_parameters(function: ast.FunctionDef) -> list[str]:
    return [
        f"line {arg.lineno}: {arg.arg}: {arg.annotation.id}"
        for arg in function.args.args
        if isinstance(arg.annotation, ast.Name) and arg.annotation.id in TENSOR_TYPES
    ]


def _in_scripted_functions(path: Path, find) -> list[str]:
    """What `find` reports in each scripted function of `path`, named by function."""
    return [
        f"{function.name}, {where}"
        for function in _scripted_functions(path)
        for where in find(function)
    ]


def test_the_rules_see_scripted_functions():
    count = sum(len(_scripted_functions(path)) for path in MODULES)
    assert count > 50


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_scripted_float_literals_are_exact_in_float32(path):
    found = _in_scripted_functions(path, _inexact_literals)
    assert not found, (
        "float literals that float32 cannot hold (they would lose digits in float64 code); "
        "use a float64 NumPy constant:\n" + "\n".join(found)
    )


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_casts_name_their_dtype(path):
    found = _integer_casts(ast.parse(path.read_text()))
    assert not found, "casts to a bare ONNX dtype code; name the dtype:\n" + "\n".join(found)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_parameters_have_a_shape(path):
    found = _in_scripted_functions(path, _scalar_parameters)
    assert not found, "parameters typed as scalars; write DOUBLE[...]:\n" + "\n".join(found)


def test_the_rules_catch_what_they_forbid():
    source = (
        "@script()\ndef f(x: DOUBLE[...], y: DOUBLE, z: TFloat) -> DOUBLE[...]:\n"
        "    return op18.Cast(x * op18.CastLike(0.1, x), to=11)\n"
    )
    tree = ast.parse(source)
    (function,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    assert _is_script(function)
    assert _inexact_literals(function) == ["line 3: 0.1"]
    assert _integer_casts(tree) == ["line 3: to=11"]
    assert _scalar_parameters(function) == ["line 2: y: DOUBLE"]
