"""The package's errors and version: importing this module imports nothing heavy."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pt-onnxscript")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"


class UnsupportedOpError(NotImplementedError):
    """Raised, before anything is built, when a graph has Ops without an ONNX translation."""


class UnsupportedTypeError(UnsupportedOpError, TypeError):
    """An UnsupportedOpError whose list includes variables of a type or dtype ONNX export
    does not take (sparse values not known at export, typed lists, slices, complex dtypes):
    also a TypeError, as PyTensor raises for a variable of the wrong type."""


class TranslationError(RuntimeError):
    """Raised when a registered translation fails on a node."""


class ExecutionError(RuntimeError, ValueError):
    """Raised when ONNX Runtime fails to run an exported model: it names the node, the
    PyTensor node and source line it was translated from, and the inputs (ONNX Runtime's own
    error is chained). Also a ValueError, as PyTensor's own modes raise for inputs that do
    not fit the graph (shapes that do not broadcast or multiply, negative sizes)."""


class IndexOutOfBoundsError(ExecutionError, IndexError):
    """An ExecutionError where ONNX Runtime met an index out of bounds (a Gather or Scatter
    of an indexing node): also an IndexError, as PyTensor's own modes raise one."""


class BatchSizeError(TypeError, ValueError):
    """Raised where the batch sizes (first dims) of BatchedDot's inputs differ: PyTensor's
    BatchedDot raises a TypeError, the Blockwise Dot that ``pt.batched_dot`` builds (which
    PyTensor's rewrites make a BatchedDot) a ValueError; this is both."""
