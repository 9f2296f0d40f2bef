"""The real Schur decomposition A = Z T Z^T (Schur, output='real'), as LAPACK's dgees computes
it for SciPy: Householder reduction to Hessenberg form (dgehd2, its reflectors accumulated in
Z), then the double-shift QR algorithm of dlahqr (Francis' shifts, Ahues and Tisseur's
deflation test, the exceptional shifts every 10 and 20 sweeps without a deflation), each
converged 2 x 2 block put in standard form by dlanv2 (complex eigenvalues: equal diagonal
entries and off-diagonal entries of opposite signs; real ones: upper triangular).

One ONNX Loop step per QR sweep or deflation, and within a sweep one step per bulge position:
the 3 x 3 reflector is applied to three rows and three columns, read by Gather and written
back by Scatter. The matrices are padded with a zero row and column so that the last,
2 x 2, reflector of a sweep is a 3 x 3 one acting as the identity on the padding. A batch is
decomposed one matrix after another (each deflates on its own schedule).

Not dgees's permutation to isolate eigenvalues (dgebal with 'P'), which changes neither the
eigenvalues nor the structure of T, only, for matrices with isolated eigenvalues, the order in
which they appear. The Schur form is unique only up to the order of its eigenvalues, the signs
of Z's columns and, for each complex pair, a choice between two standard forms; rounding can
tip these choices either way, here as between two LAPACK builds.
"""

import numpy as np

from pt_onnxscript.ops.common import branch, constant, ints, loop, range_to
from pt_onnxscript.ops.decompositions import _dim, _non_finite, _outer, _square_identity
from pt_onnxscript.ops.linalg import _nan_where, square_float_check, square_matrices
from pt_onnxscript.registry import register, register_check
from pt_onnxscript.types import onnx_dtype

try:  # PyTensor 3
    from pytensor.tensor.linalg.decomposition.schur import Schur
except ImportError:  # PyTensor 2.38
    from pytensor.tensor.slinalg import Schur

# dlahqr's exceptional shifts: after KEXSH sweeps without a deflation, and 2 KEXSH.
KEXSH = 10
# dlahqr's bound: at most this many times max(10, n) sweeps for each eigenvalue or pair.
SWEEPS_PER_EIGENVALUE = 30


def _scalar(g, x):
    """A 1-element int64 vector of the 0-d `x`."""
    return g.Unsqueeze(x, ints(g, [0]))


def _sign_of(g, x, dtype: str):
    """Fortran's SIGN(1, x): 1 where x >= 0, -1 elsewhere."""
    return g.Where(
        g.GreaterOrEqual(x, constant(g, 0, dtype)), constant(g, 1, dtype), constant(g, -1, dtype)
    )


def _hypot(g, x, y, dtype: str):
    """sqrt(x^2 + y^2) without overflow or underflow (dlapy2)."""
    zero = constant(g, 0, dtype)
    big = g.Max(g.Abs(x), g.Abs(y))
    safe = g.Where(g.Equal(big, zero), constant(g, 1, dtype), big)
    x, y = g.Div(x, safe), g.Div(y, safe)
    return g.Mul(big, g.Sqrt(g.Add(g.Mul(x, x), g.Mul(y, y))))


def hessenberg(g, a, n, dtype: str):
    """H = Q^T A Q upper Hessenberg and Q, for the matrix `a` (n, n): one Householder reflector
    per column k < n - 2 (dgehd2's, with dlarfg's signs), applied to all of H from both sides
    and to Q from the right as rank-1 updates; zeros below the subdiagonal."""
    zero, one = constant(g, 0, dtype), constant(g, 1, dtype)
    rows = range_to(g, n)

    def step(g, k, h, q):
        column = g.Gather(h, k, axis=1)
        below = g.Add(k, ints(g, 1))
        alpha = g.Gather(column, below, axis=0)
        rest = g.Where(g.Greater(rows, below), column, zero)
        big = g.ReduceMax(g.Abs(rest), keepdims=0)  # scaled, as dnrm2: no overflow
        trivial = g.Equal(big, zero)
        safe = g.Where(trivial, one, big)
        norm = g.Mul(big, g.Sqrt(g.ReduceSumSquare(g.Div(rest, safe), keepdims=0)))
        beta = g.Neg(g.Mul(_sign_of(g, alpha, dtype), _hypot(g, alpha, norm, dtype)))
        tau = g.Where(trivial, zero, g.Div(g.Sub(beta, alpha), beta))
        scale = g.Where(trivial, zero, g.Reciprocal(g.Sub(alpha, beta)))
        v = g.Where(g.Equal(rows, below), one, g.Mul(rest, scale))
        tau_v = g.Mul(tau, v)
        h = g.Sub(h, _outer(g, v, g.MatMul(tau_v, h)))
        h = g.Sub(h, _outer(g, g.MatMul(h, v), tau_v))
        q = g.Sub(q, _outer(g, g.MatMul(q, v), tau_v))
        return [h, q]

    identity = _square_identity(g, a, n, dtype)
    steps = g.Max(g.Sub(n, ints(g, 2)), ints(g, 0))
    h, q = loop(g, steps, [a, identity], step, "hessenberg")
    return _hessenberg_part(g, h), q


def _hessenberg_part(g, h):
    """The entries of the matrices `h` on and above the first subdiagonal; zeros below."""
    return g.Trilu(h, ints(g, -1), upper=1)


def _standard_block(g, a, b, c, d, dtype: str):
    """dlanv2: the 2 x 2 block [[a, b], [c, d]] (0-d values) in standard form, rotated by
    [[cs, sn], [-sn, cs]]: (a, b, c, d, cs, sn) after. Real eigenvalues make it upper
    triangular; complex ones give equal diagonal entries and b c < 0. (dlanv2's rescaling of
    tiny or huge entries is not needed: _hypot does not overflow.)"""
    zero, one, half = (constant(g, v, dtype) for v in (0, 1, 0.5))

    def sign(x):
        return _sign_of(g, x, dtype)

    # Real eigenvalues, well apart: make c zero directly.
    temp = g.Sub(a, d)
    p = g.Mul(half, temp)
    bcmax = g.Max(g.Abs(b), g.Abs(c))
    bcmis = g.Mul(g.Mul(g.Min(g.Abs(b), g.Abs(c)), sign(b)), sign(c))
    scale = g.Max(g.Abs(p), bcmax)
    z = g.Add(g.Mul(g.Div(p, scale), p), g.Mul(g.Div(bcmax, scale), bcmis))
    real = g.GreaterOrEqual(z, constant(g, 4 * np.finfo(dtype).eps, dtype))
    root = g.Add(p, g.Mul(sign(p), g.Mul(g.Sqrt(scale), g.Sqrt(g.Abs(z)))))
    real_a = g.Add(d, root)
    real_d = g.Sub(d, g.Mul(g.Div(bcmax, root), bcmis))
    tau = _hypot(g, c, root, dtype)
    real_cs, real_sn = g.Div(root, tau), g.Div(c, tau)
    # Complex or nearly equal eigenvalues: make the diagonal entries equal.
    sigma = g.Add(b, c)
    tau = _hypot(g, sigma, temp, dtype)
    cs = g.Sqrt(g.Mul(half, g.Add(one, g.Div(g.Abs(sigma), tau))))
    sn = g.Mul(g.Neg(g.Div(p, g.Mul(tau, cs))), sign(sigma))
    aa, bb = g.Add(g.Mul(a, cs), g.Mul(b, sn)), g.Sub(g.Mul(b, cs), g.Mul(a, sn))
    cc, dd = g.Add(g.Mul(c, cs), g.Mul(d, sn)), g.Sub(g.Mul(d, cs), g.Mul(c, sn))
    b2 = g.Add(g.Mul(bb, cs), g.Mul(dd, sn))
    c2 = g.Sub(g.Mul(cc, cs), g.Mul(aa, sn))
    mid = g.Mul(
        half, g.Add(g.Add(g.Mul(aa, cs), g.Mul(cc, sn)), g.Sub(g.Mul(dd, cs), g.Mul(bb, sn)))
    )
    # ... and if they are real after all (b2, c2 of one sign), upper triangular.
    b_zero, c_zero = g.Equal(b2, zero), g.Equal(c2, zero)
    split = g.And(g.And(g.Not(c_zero), g.Not(b_zero)), g.Equal(sign(b2), sign(c2)))
    flip = g.And(g.Not(c_zero), b_zero)
    sab, sac = g.Sqrt(g.Abs(b2)), g.Sqrt(g.Abs(c2))
    offset = g.Mul(sign(c2), g.Mul(sab, sac))
    scale = g.Reciprocal(g.Sqrt(g.Abs(g.Add(b2, c2))))
    cs1, sn1 = g.Mul(sab, scale), g.Mul(sac, scale)
    complex_ = [
        g.Where(split, g.Add(mid, offset), mid),
        g.Where(split, g.Sub(b2, c2), g.Where(flip, g.Neg(c2), b2)),
        g.Where(g.Or(split, flip), zero, c2),
        g.Where(split, g.Sub(mid, offset), mid),
        g.Where(split, g.Sub(g.Mul(cs, cs1), g.Mul(sn, sn1)), g.Where(flip, g.Neg(sn), cs)),
        g.Where(split, g.Add(g.Mul(cs, sn1), g.Mul(sn, cs1)), g.Where(flip, cs, sn)),
    ]
    real_ = [real_a, g.Sub(b, c), zero, real_d, real_cs, real_sn]
    general = [g.Where(real, x, y) for x, y in zip(real_, complex_, strict=True)]
    # dlanv2's first cases: already standard (c = 0, or a = d with b c < 0), or b = 0 (swap).
    swap = g.Equal(b, zero)
    opposite = g.And(g.Equal(temp, zero), g.Not(g.Equal(sign(b), sign(c))))
    keep = g.Or(g.Equal(c, zero), g.And(g.Not(swap), opposite))
    swapped = [d, g.Neg(c), zero, a, zero, one]
    kept = [a, b, c, d, one, zero]
    return [
        g.Where(keep, x, g.Where(swap, y, z))
        for x, y, z in zip(kept, swapped, general, strict=True)
    ]


def _entry(g, flat, size, row, column):
    """Entry (row, column) (0-d int64) of the square matrix of side `size` whose entries, row
    by row, are `flat`."""
    return g.Gather(flat, g.Add(g.Mul(row, size), column), axis=0)


def _flat_indices(g, size, base, offsets):
    """The flat indices of the entries H[base + dr, base + dc] of a square matrix of side
    `size` (its last row and column the zero padding), for the vector `base` and each (dr,
    dc) of `offsets`, stacked as rows; the padding's corner where such an index would be
    negative."""
    corner = g.Sub(g.Mul(size, size), ints(g, 1))
    rows = []
    for dr, dc in offsets:
        index = g.Add(g.Mul(g.Add(base, ints(g, dr)), size), g.Add(base, ints(g, dc)))
        if min(dr, dc) < 0:
            index = g.Where(g.GreaterOrEqual(base, ints(g, -min(dr, dc))), index, corner)
        rows.append(g.Unsqueeze(index, ints(g, [0])))
    return g.Concat(*rows, axis=0)


def _set_rows(g, x, index, rows):
    """x with its rows `index` (k) replaced by `rows` (k, n)."""
    return g.ScatterND(x, g.Unsqueeze(index, ints(g, [1])), rows)


def _set_columns(g, x, index, columns):
    """x (m, n) with its columns `index` (k) replaced by `columns` (m, k)."""
    shape = g.Concat(g.Shape(x, end=1), g.Shape(index), axis=0)
    return g.ScatterElements(x, g.Expand(g.Unsqueeze(index, ints(g, [0])), shape), columns, axis=1)


def _rotate_both(g, h, z, index, rotation):
    """h with the rows `index` replaced by rotation @ those rows and then its columns (and z's)
    by those columns @ rotation^T: the similarity transformation G h G^T."""
    h = _set_rows(g, h, index, g.MatMul(rotation, g.Gather(h, index, axis=0)))
    rotation_t = g.Transpose(rotation, perm=[1, 0])
    h = _set_columns(g, h, index, g.MatMul(g.Gather(h, index, axis=1), rotation_t))
    z = _set_columns(g, z, index, g.MatMul(g.Gather(z, index, axis=1), rotation_t))
    return h, z


def _matrix_of(g, entries, side: int):
    """The side x side matrix of the 0-d `entries`, row by row."""
    flat = g.Concat(*[g.Unsqueeze(e, ints(g, [0])) for e in entries], axis=0)
    return g.Reshape(flat, ints(g, [side, side]))


def _pad(g, x, rows: bool):
    """x (m, n) with a zero column appended, and a zero row if `rows`."""
    return g.Pad(x, ints(g, [0, 0, 1 if rows else 0, 1]))


def _split_point(g, flat, i, tables, dtype: str):
    """dlahqr's L: the largest k <= i whose subdiagonal entry H[k, k-1] is negligible (an
    absolute test against smlnum, then Ahues and Tisseur's relative one), 0 if none; H is
    read through the flat indices tables["tests"] (see _tables)."""
    smlnum, ulp = tables["smlnum"], constant(g, np.finfo(dtype).eps, dtype)
    zero = constant(g, 0, dtype)
    values = g.Gather(flat, tables["tests"], axis=0)
    sub, d0, d1, sup, left, below = g.Split(values, axis=0, num_outputs=6, _outputs=6)
    diff = g.Abs(g.Sub(d0, d1))
    sub, d0, d1, sup = (g.Abs(x) for x in (sub, d0, d1, sup))
    tst = g.Add(d0, d1)
    tst = g.Where(g.Equal(tst, zero), g.Add(g.Add(tst, g.Abs(left)), g.Abs(below)), tst)
    ab, ba = g.Max(sub, sup), g.Min(sub, sup)
    aa, bb = g.Max(d1, diff), g.Min(d1, diff)
    s = g.Add(aa, ab)
    relative = g.LessOrEqual(
        g.Mul(ba, g.Div(ab, s)), g.Max(smlnum, g.Mul(ulp, g.Mul(bb, g.Div(aa, s))))
    )
    negligible = g.Or(
        g.LessOrEqual(sub, smlnum), g.And(g.LessOrEqual(sub, g.Mul(ulp, tst)), relative)
    )
    k = tables["k"]
    found = g.Where(g.And(negligible, g.LessOrEqual(k, i)), k, ints(g, 0))
    return g.ReduceMax(g.Concat(ints(g, [[0]]), found, axis=1), keepdims=0)


def _shifts(g, flat, i, low, kdefl, tables, dtype: str):
    """dlahqr's double shift for the active block low..i: the eigenvalues sr +- si i of its
    trailing 2 x 2 block (for real ones, twice the one nearer H[i, i]), or an exceptional
    shift after 2 KEXSH (from the bottom) or KEXSH (from the top) sweeps without deflation.
    (1-element vectors.)"""
    zero, one, two = (constant(g, v, dtype) for v in (0, 1, 2))
    diagonal = tables["diagonal"]  # flat index of H[j, j] is j (n + 2)
    francis = g.Gather(flat, g.Add(g.Mul(i, diagonal), tables["francis"]), axis=0)
    bottom = g.Equal(g.Mod(kdefl, ints(g, 2 * KEXSH)), ints(g, 0))
    top = g.Equal(g.Mod(kdefl, ints(g, KEXSH)), ints(g, 0))
    # |H[i, i-1]| + |H[i-1, i-2]| and H[i, i] from the bottom, or |H[l+1, l]| + |H[l+2, l+1]|
    # and H[l, l] from the top: s and the corner, then (0.75 s + corner, -0.4375 s, s, same).
    base = g.Where(bottom, i, low)
    offsets = g.Where(bottom, tables["bottom"], tables["top"])
    entries = g.Gather(flat, g.Add(g.Mul(base, diagonal), offsets), axis=0)
    s = g.ReduceSum(g.Mul(g.Abs(entries), constant(g, [1, 1, 0], dtype)), keepdims=1)
    corner = g.Gather(entries, ints(g, [2]), axis=0)
    exceptional = g.Add(
        g.Mul(s, constant(g, [0.75, -0.4375, 1, 0.75], dtype)),
        g.Mul(corner, constant(g, [1, 0, 0, 1], dtype)),
    )
    block = g.Where(g.Or(bottom, top), exceptional, francis)
    s = g.ReduceSum(g.Abs(block), keepdims=1)
    null = g.Equal(s, zero)
    s = g.Where(null, one, s)
    h11, h12, h21, h22 = g.Split(g.Div(block, s), axis=0, num_outputs=4, _outputs=4)
    tr = g.Div(g.Add(h11, h22), two)
    det = g.Sub(g.Mul(g.Sub(h11, tr), g.Sub(h22, tr)), g.Mul(h12, h21))
    rtdisc = g.Sqrt(g.Abs(det))
    complex_ = g.GreaterOrEqual(det, zero)
    r1, r2 = g.Add(tr, rtdisc), g.Sub(tr, rtdisc)
    nearer = g.Where(g.LessOrEqual(g.Abs(g.Sub(r1, h22)), g.Abs(g.Sub(r2, h22))), r1, r2)
    sr = g.Mul(g.Where(complex_, tr, nearer), s)
    si = g.Where(complex_, g.Mul(rtdisc, s), zero)
    return g.Where(null, zero, sr), g.Where(null, zero, si)


def _start(g, flat, low, i, sr, si, tables, dtype: str):
    """dlahqr's M: the largest m in low..i-2 where a sweep may start (H[m, m-1] negligible
    against the first column of (H - s1)(H - s2) there), low if none; and that column, scaled
    (3). H is read through the flat indices tables["starts"] (see _tables)."""
    ulp = constant(g, np.finfo(dtype).eps, dtype)
    values = g.Gather(flat, tables["starts"], axis=0)
    hmm, h10, h01, h11, h21, prev, prev2 = g.Split(values, axis=0, num_outputs=7, _outputs=7)
    shifted = g.Sub(hmm, sr)
    s = g.Add(g.Add(g.Abs(shifted), g.Abs(si)), g.Abs(h10))
    h21s = g.Div(h10, s)
    v1 = g.Add(g.Add(g.Mul(h21s, h01), g.Mul(shifted, g.Div(shifted, s))), g.Mul(si, g.Div(si, s)))
    v2 = g.Mul(h21s, g.Sub(g.Sub(g.Add(hmm, h11), sr), sr))
    v3 = g.Mul(h21s, h21)
    columns = g.Concat(v1, v2, v3, axis=0)  # (3, n-2)
    columns = g.Div(columns, g.ReduceSum(g.Abs(columns), ints(g, [0]), keepdims=1))
    v1, v2, v3 = g.Split(columns, axis=0, num_outputs=3, _outputs=3)
    lhs = g.Mul(g.Abs(prev), g.Add(g.Abs(v2), g.Abs(v3)))
    rhs = g.Mul(g.Mul(ulp, g.Abs(v1)), g.Add(g.Add(g.Abs(prev2), g.Abs(hmm)), g.Abs(h11)))
    m = tables["m"]
    inside = g.And(g.Greater(m, low), g.LessOrEqual(m, g.Sub(i, ints(g, 2))))
    found = g.Where(g.And(inside, g.LessOrEqual(lhs, rhs)), m, ints(g, -1))
    start = g.Max(low, g.ReduceMax(g.Concat(ints(g, [[-1]]), found, axis=1), keepdims=0))
    return start, g.Gather(columns, start, axis=1)


def _reflector3(g, v, dtype: str):
    """dlarfg on the 3-vector `v` = (alpha, x): beta, and the reflector I - t1 u u^T (3, 3) with
    u = (1, x / (alpha - beta)) that maps v to (beta, 0, 0); the identity, and beta = alpha,
    where x = 0."""
    zero = constant(g, 0, dtype)
    alpha = g.Gather(v, ints(g, 0), axis=0)
    tail = g.Mul(v, constant(g, [0, 1, 1], dtype))
    big = g.ReduceMax(g.Abs(v), keepdims=0)
    safe = g.Where(g.Equal(big, zero), constant(g, 1, dtype), big)
    norm = g.Mul(big, g.Sqrt(g.ReduceSumSquare(g.Div(v, safe), keepdims=0)))
    trivial = g.Equal(g.ReduceMax(g.Abs(tail), keepdims=0), zero)
    beta = g.Mul(
        norm, g.Where(g.GreaterOrEqual(alpha, zero), constant(g, -1, dtype), constant(g, 1, dtype))
    )
    t1 = g.Where(trivial, zero, g.Div(g.Sub(beta, alpha), beta))
    scale = g.Where(trivial, zero, g.Reciprocal(g.Sub(alpha, beta)))
    u = g.Add(constant(g, [1, 0, 0], dtype), g.Mul(tail, scale))
    reflector = g.Sub(constant(g, np.eye(3), dtype), g.Mul(t1, _outer(g, u, u)))
    return g.Where(trivial, alpha, beta), t1, reflector


def _sweep(g, h, z, low, i, kdefl, flat, size, tables, dtype: str):
    """One double-shift QR sweep over the active block low..i of the padded h (n+1, n+1), its
    transformations accumulated in z (n, n+1): the bulge made at the start row m by the
    first column of (H - s1)(H - s2) is chased down to row i by 3 x 3 reflectors (the last
    a 2 x 2 one: a third entry of 0)."""
    sr, si = _shifts(g, flat, i, low, kdefl, tables, dtype)
    start, first = _start(g, flat, low, i, sr, si, tables, dtype)
    zero, one = constant(g, 0, dtype), constant(g, 1, dtype)
    offsets = ints(g, [0, 1, 2])
    columns = range_to(g, size)
    head = constant(g, [True, False, False], "bool")
    # At the start row, dlahqr scales H[m, m-1] by 1 - t1 where m > low (it is negligible).
    scaled_head = g.Where(
        g.Greater(start, low), constant(g, [1, 0, 0], dtype), constant(g, [0, 0, 0], dtype)
    )
    # The rows' and columns' indices, for k = 0.
    row_index = ints(g, [[0], [1], [2]])
    h_columns = g.Expand(ints(g, [[0, 1, 2]]), g.Concat(_scalar(g, size), ints(g, [3]), axis=0))
    z_columns = g.Expand(ints(g, [[0, 1, 2]]), g.Concat(g.Shape(z, end=1), ints(g, [3]), axis=0))

    def step(g, j, h, z):
        # The last step's reflector is 2 x 2: the third entry it reads, H[i+1, i-2], is 0.
        k = g.Add(start, j)
        before = g.Sub(k, ints(g, 1))
        index = g.Add(k, offsets)
        rows = g.Gather(h, index, axis=0)  # (3, n+1)
        previous = g.Gather(rows, before, axis=1)  # column k-1 (the padding's for k = 0)
        chasing = g.Greater(j, ints(g, 0))
        beta, t1, reflector = _reflector3(g, g.Where(chasing, previous, first), dtype)
        # Column k-1: the bulge's entries become (beta, 0, 0).
        scaled = g.Mul(previous, g.Sub(one, g.Mul(t1, scaled_head)))
        fixed = g.Where(chasing, g.Where(head, beta, zero), scaled)
        updated = g.Where(
            g.GreaterOrEqual(columns, k),
            g.MatMul(reflector, rows),
            g.Where(g.Equal(columns, before), g.Unsqueeze(fixed, ints(g, [1])), rows),
        )
        h = g.ScatterND(h, g.Add(row_index, k), updated)
        new = g.MatMul(g.Gather(h, index, axis=1), reflector)
        h = g.ScatterElements(h, g.Add(h_columns, k), new, axis=1)
        new = g.MatMul(g.Gather(z, index, axis=1), reflector)
        z = g.ScatterElements(z, g.Add(z_columns, k), new, axis=1)
        return [h, z]

    return loop(g, g.Sub(i, start), [h, z], step, "schur_sweep")


def _deflate(g, h, z, low, i, flat, size, dtype: str):
    """h and z after the block low..i (of 1 or 2 rows) splits off at the bottom: a 2 x 2 block
    is put in standard form (_standard_block), its rotation applied to the rest of h and to
    z."""

    def pair(g):
        up = g.Sub(i, ints(g, 1))
        block = [_entry(g, flat, size, r, c) for r in (up, i) for c in (up, i)]
        a, b, c, d, cs, sn = _standard_block(g, *block, dtype)
        index = g.Concat(_scalar(g, up), _scalar(g, i), axis=0)
        h2, z2 = _rotate_both(g, h, z, index, _matrix_of(g, [cs, sn, g.Neg(sn), cs], 2))
        pairs = [_scalar(g, x) for x in (up, up, up, i, i, up, i, i)]
        entries = g.Reshape(g.Concat(*pairs, axis=0), ints(g, [4, 2]))
        values = g.Concat(*[_scalar(g, x) for x in (a, b, c, d)], axis=0)
        return [g.ScatterND(h2, entries, values), z2]

    def single(g):
        return [g.Identity(h), g.Identity(z)]

    float_type = onnx_dtype(dtype)
    return g.If(
        g.Equal(low, g.Sub(i, ints(g, 1))),
        then_branch=branch(g, "schur_pair", pair, [float_type, float_type]),
        else_branch=branch(g, "schur_single", single, [float_type, float_type]),
        _outputs=2,
    )


def _tables(g, n, size, dtype: str):
    """What the iteration reads of the padded H through its flat entries (side `size` = n + 1),
    made once: for _split_point, k = 1..n-1 and the indices of H[k, k-1], H[k-1, k-1], H[k, k],
    H[k-1, k], H[k-1, k-2], H[k+1, k] ("tests", 6 x (n - 1)); for _start, m = 0..n-3 and those
    of H[m, m], H[m+1, m], H[m, m+1], H[m+1, m+1], H[m+2, m+1], H[m, m-1], H[m-1, m-1]
    ("starts", 7 x (n - 2)) (the padding's corner where there is no such entry); for _shifts,
    the offsets from H[j, j] (index j (size + 1)) of the trailing 2 x 2 block and of the
    entries of the exceptional shifts; dlahqr's smlnum."""
    one = ints(g, 1)
    k = g.Range(one, n, one)
    m = g.Range(ints(g, 0), g.Max(g.Sub(n, ints(g, 2)), ints(g, 0)), one)
    tests = [(0, -1), (-1, -1), (0, 0), (-1, 0), (-1, -2), (1, 0)]
    starts = [(0, 0), (1, 0), (0, 1), (1, 1), (2, 1), (0, -1), (-1, -1)]
    diagonal = g.Add(size, one)
    zero = ints(g, [0])
    row, twice = _scalar(g, size), _scalar(g, g.Add(g.Mul(size, ints(g, 2)), one))
    ulp = np.finfo(dtype).eps
    return {
        "k": k,
        "tests": _flat_indices(g, size, k, tests),
        "m": m,
        "starts": _flat_indices(g, size, m, starts),
        "diagonal": diagonal,
        # H[i-1, i-1], H[i-1, i], H[i, i-1], H[i, i]
        "francis": g.Concat(g.Neg(_scalar(g, diagonal)), g.Neg(row), ints(g, [-1]), zero, axis=0),
        # H[i, i-1], H[i-1, i-2], H[i, i]; H[l+1, l], H[l+2, l+1], H[l, l]
        "bottom": g.Concat(ints(g, [-1]), g.Neg(_scalar(g, g.Add(diagonal, one))), zero, axis=0),
        "top": g.Concat(row, twice, zero, axis=0),
        "smlnum": g.Mul(
            constant(g, np.finfo(dtype).tiny / ulp, dtype), g.Cast(n, to=onnx_dtype(dtype))
        ),
    }


def _qr_algorithm(g, h, q, n, dtype: str):
    """T and Z from the Hessenberg h = Q^T A Q (n, n) by dlahqr's iteration (one Loop step per
    deflation or sweep, at most 30 max(10, n) sweeps per eigenvalue, as LAPACK's), and whether
    it failed to converge."""
    size = g.Add(n, ints(g, 1))
    h, z = _pad(g, h, rows=True), _pad(g, q, rows=False)
    tables = _tables(g, n, size, dtype)
    most = g.Mul(ints(g, SWEEPS_PER_EIGENVALUE), g.Max(n, ints(g, 10)))
    corner = g.Concat(_scalar(g, n), _scalar(g, n), axis=0)

    def step(g, _, h, z, i, sweeps, kdefl):
        flat = g.Reshape(h, ints(g, [-1]))
        low = _split_point(g, flat, i, tables, dtype)
        # H[low, low-1] = 0 (the padding's corner (n, n) when low = 0).
        entry = g.Where(
            g.Greater(low, ints(g, 0)),
            g.Concat(_scalar(g, low), _scalar(g, g.Sub(low, ints(g, 1))), axis=0),
            corner,
        )
        h = g.ScatterND(h, g.Unsqueeze(entry, ints(g, [0])), constant(g, [0], dtype))
        flat = g.Reshape(h, ints(g, [-1]))

        def split(g):
            h2, z2 = _deflate(g, h, z, low, i, flat, size, dtype)
            return [h2, z2, g.Sub(low, ints(g, 1)), g.Identity(ints(g, 0)), g.Identity(ints(g, 0))]

        def sweep(g):
            kdefl2 = g.Add(kdefl, ints(g, 1))
            h2, z2 = _sweep(g, h, z, low, i, kdefl2, flat, size, tables, dtype)
            return [h2, z2, g.Identity(i), g.Add(sweeps, ints(g, 1)), kdefl2]

        types = [onnx_dtype(dtype)] * 2 + [onnx_dtype("int64")] * 3
        h, z, i, sweeps, kdefl = g.If(
            g.GreaterOrEqual(low, g.Sub(i, ints(g, 1))),
            then_branch=branch(g, "schur_split", split, types),
            else_branch=branch(g, "schur_sweep", sweep, types),
            _outputs=5,
        )
        go_on = g.And(g.GreaterOrEqual(i, ints(g, 0)), g.LessOrEqual(sweeps, most))
        return [go_on, h, z, i, sweeps, kdefl]

    last = g.Sub(n, ints(g, 1))
    state = [h, z, last, ints(g, 0), ints(g, 0)]
    h, z, i, _, _ = loop(
        g, None, state, step, "schur", condition=g.GreaterOrEqual(last, ints(g, 0))
    )
    square = _scalar(g, n)
    t = g.Slice(h, ints(g, [0, 0]), g.Concat(square, square, axis=0), ints(g, [0, 1]))
    z = g.Slice(z, ints(g, [0]), square, ints(g, [1]))
    return _hessenberg_part(g, t), z, g.GreaterOrEqual(i, ints(g, 0))


def real_schur(g, a, dtype: str):
    """T and Z for one matrix `a` (n, n); NaN T and Z where `a` holds a NaN or an infinity
    (SciPy's check, as PyTensor's perform) or the iteration does not converge (LAPACK's
    info > 0)."""
    n = _dim(g, a, -1)
    bad = _non_finite(g, a)
    a = g.Where(bad, constant(g, 0, dtype), a)  # a quick, harmless run
    h, q = hessenberg(g, a, n, dtype)
    t, z, failed = _qr_algorithm(g, h, q, n, dtype)
    failed = g.Or(bad, failed)
    return _nan_where(g, failed, t, dtype), _nan_where(g, failed, z, dtype)


@register_check(Schur)
def _check_schur(node):
    op = getattr(node.op, "core_op", node.op)
    if op.output != "real":
        return (
            "schur with output='complex': ONNX Runtime has no complex dtypes; output='real' "
            "gives the real Schur form (2 x 2 blocks for complex eigenvalue pairs)"
        )
    if op.sort is not None:
        return (
            f"schur with sort={op.sort!r}: reordering the Schur form (LAPACK's trsen) has no "
            "translation yet; use sort=None"
        )
    return square_float_check(node)


@register(Schur)
def schur(g, node, a):
    """Schur(output='real') -> Hessenberg reduction and dlahqr's double-shift QR algorithm (a
    batch runs through Blockwise's Loop, one matrix after another)."""
    dtype = node.outputs[0].type.dtype
    a = square_matrices(g, node.inputs[0], a, ValueError, "expected square matrix")
    if node.inputs[0].type.dtype != dtype:
        a = g.Cast(a, to=onnx_dtype(dtype))
    return list(real_schur(g, a, dtype))
