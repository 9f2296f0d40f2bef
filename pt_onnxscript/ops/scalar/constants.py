"""Float64 constants the scalar algorithms share, as 0-d float64 NumPy arrays.

In a scripted function a Python float literal becomes a float32 constant; a NumPy float64
array becomes a float64 one. Names and values are Cephes' (``mconf.h``, ``const.c``).
"""

import numpy as np

NAN = np.array(np.nan)
INF = np.array(np.inf)
E = np.array(np.e)
PI = np.array(np.pi)
LN2 = np.array(np.log(2.0))
EULER = np.array(0.577215664901532860606512090082402431)  # Euler-Mascheroni constant
MACHEP = np.array(1.11022302462515654042e-16)  # 2**-53
MAXLOG = np.array(7.09782712893383996732e2)  # log(largest float64)
MINLOG = np.array(-7.451332191019412076235e2)  # log(smallest subnormal float64)
MAXGAM = np.array(171.624376956302725)  # largest argument of a finite gamma
