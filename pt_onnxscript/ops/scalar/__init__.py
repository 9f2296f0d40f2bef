"""Scalar translations, used by Elemwise and Composite, grouped as ``pytensor.scalar`` is:
basic arithmetic and comparisons, elementary transcendental functions, special functions
(gamma family, polygamma, incomplete gamma and beta and their inverses, Bessel, Owen's T) and ScalarLoop."""

from pt_onnxscript.ops.scalar import (  # noqa: F401
    basic,
    bessel,
    bessel_k,
    betainc,
    betaincinv,
    gammainc,
    gammaincinv,
    loop,
    math,
    owens_t,
    polygamma,
    special,
)
