"""Random state as data: a PyTensor random generator is a ``uint64[2]`` tensor in ONNX.

The tensor is ``[key, counter]`` for the counter-based Philox4x32-10 generator of
``ops/random.py``: a random variable with N elements draws from the counters
``counter .. counter + N - 1`` under `key` and returns ``[key, counter + N]`` as its next
state, so successive draws are independent and the same state gives the same draws.

Outside ONNX, the state travels as a ``numpy.random.Generator`` (what PyTensor's random
generator variables hold): ``generator_from_state`` wraps it in a NumPy Philox bit generator
whose second key word marks it as ours, and ``state_from_generator`` reads it back. Any other
Generator (``np.random.default_rng(seed)``, say) gets a key drawn from a copy of it, so the
same seed gives the same draws. The draws differ from NumPy's streams; the distributions do not.
"""

import copy

import numpy as np
from pytensor.tensor.random.type import RandomType

STATE_DTYPE = "uint64"
STATE_SHAPE = (2,)

# The second key word of the NumPy Philox generators that carry a state of ours ("ptonnxrn").
_MARK = np.uint64(0x70746F6E6E78726E)


def is_random_state(var) -> bool:
    """Whether PyTensor variable `var` is a random generator (a state tensor in ONNX)."""
    return isinstance(var.type, RandomType)


def state_from_generator(generator) -> np.ndarray:
    """The ``uint64[2]`` state ``[key, counter]`` of NumPy Generator `generator`."""
    if isinstance(generator, np.ndarray):
        return _checked_state(generator)
    if not isinstance(generator, np.random.Generator):
        raise TypeError(
            f"A random generator variable takes a numpy.random.Generator (such as "
            f"np.random.default_rng(seed)), not {type(generator).__name__}"
        )
    bit_generator = generator.bit_generator
    if isinstance(bit_generator, np.random.Philox):
        state = bit_generator.state["state"]
        key, counter = state["key"], state["counter"]
        if key[1] == _MARK and not counter[1:].any():
            return np.array([key[0], counter[0]], dtype=STATE_DTYPE)
    # A generator of NumPy's own: a key drawn from a copy of it (the caller's is untouched).
    key = copy.deepcopy(generator).integers(2**64, dtype=np.uint64)
    return np.array([key, 0], dtype=STATE_DTYPE)


def generator_from_state(state: np.ndarray) -> np.random.Generator:
    """A NumPy Generator carrying ``uint64[2]`` state `state` (see `state_from_generator`)."""
    key, counter = _checked_state(state)
    philox = np.random.Philox(
        key=np.array([key, _MARK], dtype=np.uint64),
        counter=np.array([counter, 0, 0, 0], dtype=np.uint64),
    )
    return np.random.Generator(philox)


def _checked_state(state) -> np.ndarray:
    array = np.asarray(state)
    if array.dtype != np.uint64 or array.shape != STATE_SHAPE:
        raise TypeError(
            f"A random state is a uint64 array [key, counter] of shape {STATE_SHAPE}, not "
            f"{array.dtype} of shape {array.shape}"
        )
    return array
