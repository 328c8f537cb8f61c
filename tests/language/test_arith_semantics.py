"""Arithmetic semantics of the Triton language on spyre, one table per feature.

Integer `//` and `%` (C-style truncation: arith.divsi/remsi, divui/remui) for every integer dtype, as
tiles, as scalars and by constants, with the INT_MIN and unsigned-maximum edges; shifts (arithmetic
`>>` for signed, logical for unsigned) over every amount in the bit width; wrap-around of add, sub,
mul and negation; tl.umulhi; tl.fma with one rounding; tl.sqrt_rn and tl.div_rn correctly rounded
(and tl.sqrt and `/` within Triton's "fast" tolerance); tl.clamp and tl.maximum/tl.minimum with
PropagateNan.NONE/ALL; NaN in tl.max/tl.min reductions; bitcasts between same-size types; i1 values;
cache modifiers, eviction policies and volatile on loads and stores; scalar loads and stores, masked
and unmasked; pointers loaded from memory.

Integers are compared bit for bit with Python integer arithmetic; floats bit for bit with an exact
(Fraction or float64) reference rounded once, except where Triton itself allows an error.
Undefined cases (division by zero, INT_MIN // -1: undefined behaviour of arith.divsi/remsi) are only
checked not to bring the process down.
"""
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE

I8, I16, I32, I64 = torch.int8, torch.int16, torch.int32, torch.int64
U8, U16, U32, U64 = torch.uint8, torch.uint16, torch.uint32, torch.uint64
F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
INT_TYPES = [I8, I16, I32, I64, U8, U16, U32, U64]
FLOAT_TYPES = [F16, BF16, F32, F64]
_SIGNED_OF = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def name(dt):
    return str(dt).replace("torch.", "")


def dev(t):
    return t.to(DEVICE)


# -- exact integer helpers ------------------------------------------------------------------------------
def width(dt):
    return torch.iinfo(dt).bits


def signed(dt):
    return torch.iinfo(dt).min < 0


def wrap(v, dt):
    """v reduced to dt's range (two's complement wrap-around)."""
    w = width(dt)
    v &= (1 << w) - 1
    return v - (1 << w) if signed(dt) and v >= 1 << (w - 1) else v


def ints(values, dt):
    """A CPU tensor of dt holding the Python ints `values` (any, wrapped to dt)."""
    st = _SIGNED_OF[width(dt) // 8]
    return torch.tensor([wrap(v, st) for v in values], dtype=st).view(dt)


def py(t):
    """A tensor's elements as exact Python ints of its dtype (unsigned ones unsigned)."""
    t = t.cpu().contiguous()
    raw = t.view(_SIGNED_OF[t.element_size()]).tolist()
    return [wrap(v, t.dtype) for v in raw]


def fbits(t):
    """Raw bits of a float tensor as Python ints."""
    t = t.cpu().contiguous()
    w = 8 * t.element_size()
    return [v & ((1 << w) - 1) for v in t.view(_SIGNED_OF[t.element_size()]).tolist()]


def tdiv(x, y):
    """C division: the quotient truncated toward zero."""
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def trem(x, y):
    """C remainder: the sign of the dividend."""
    return x - tdiv(x, y) * y


def special_ints(dt):
    lo, hi = torch.iinfo(dt).min, torch.iinfo(dt).max
    if signed(dt):
        return sorted({0, 1, -1, 2, -2, 3, -3, 7, -7, min(100, hi), max(-100, lo), lo, lo + 1, hi, hi - 1,
                       hi // 2, lo // 2})
    return sorted({0, 1, 2, 3, 7, hi // 2, hi // 2 + 1, hi // 2 + 2, hi - 1, hi, 100})


def random_ints(dt, n, seed):
    g = np.random.default_rng(seed)
    w = width(dt)
    raw = [int(v) for v in g.integers(0, 1 << 63, n, dtype=np.int64)]
    out = []
    for i, r in enumerate(raw):
        r = (r << 1 | i & 1) & ((1 << w) - 1)  # every bit, the top one included
        if i % 4 == 1:
            r &= 0xFF  # small magnitudes too
        out.append(wrap(r, dt))
    return out


def block_for(n):
    return max(16, triton.next_power_of_2(n))


# == integer division and remainder ===================================================================
@triton.jit
def divmod_tile_kernel(x_ptr, y_ptr, q_ptr, r_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    tl.store(q_ptr + offs, x // y, mask=m)
    tl.store(r_ptr + offs, x % y, mask=m)


@triton.jit
def divmod_scalar_kernel(x_ptr, y_ptr, q_ptr, r_ptr):
    i = tl.program_id(0)
    x = tl.load(x_ptr + i)  # scalars: one program per pair
    y = tl.load(y_ptr + i)
    tl.store(q_ptr + i, x // y)
    tl.store(r_ptr + i, x % y)


@triton.jit
def divmod_const_kernel(x_ptr, q_ptr, r_ptr, n, D: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    d = tl.cast(D, x.dtype)  # a constant divisor of x's dtype (a Python int would promote unsigned x)
    tl.store(q_ptr + offs, x // d, mask=m)
    tl.store(r_ptr + offs, x % d, mask=m)


def _div_pairs(dt):
    """Defined (x, y) pairs: every special against every special, and random pairs; no y == 0 and no
    INT_MIN // -1 (undefined in arith.divsi/remsi, see test_undefined_division_does_not_crash)."""
    lo = torch.iinfo(dt).min
    sp = special_ints(dt)
    pairs = [(x, y) for x in sp for y in sp if y != 0 and not (signed(dt) and x == lo and y == -1)]
    xs, ys = random_ints(dt, 96, 1), random_ints(dt, 96, 2)
    pairs += [(x, y) for x, y in zip(xs, ys) if y != 0 and not (signed(dt) and x == lo and y == -1)]
    return pairs


@pytest.mark.parametrize("form", ["tile", "scalar"])
@pytest.mark.parametrize("dtype", INT_TYPES, ids=name)
def test_integer_divmod_truncates(dtype, form):
    pairs = _div_pairs(dtype)
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    x, y = dev(ints(xs, dtype)), dev(ints(ys, dtype))
    q, r = torch.empty_like(x), torch.empty_like(x)
    n = len(pairs)
    if form == "tile":
        divmod_tile_kernel[(triton.cdiv(n, 128),)](x, y, q, r, n, BLOCK=128)
    else:
        divmod_scalar_kernel[(n,)](x, y, q, r)
    want_q = [wrap(tdiv(a, b), dtype) for a, b in pairs]
    want_r = [wrap(trem(a, b), dtype) for a, b in pairs]
    got_q, got_r = py(q), py(r)
    bad = [(a, b, gq, wq, gr, wr) for (a, b), gq, wq, gr, wr in zip(pairs, got_q, want_q, got_r, want_r)
           if gq != wq or gr != wr]
    assert not bad, f"{len(bad)} wrong (x, y, q, want q, r, want r), first: {bad[:5]}"


@triton.jit
def divmod_bcast_kernel(x_ptr, e_ptr, d_ptr, out_ptr, n, ne, BLOCK: tl.constexpr):
    j = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    d = tl.load(d_ptr + j)  # a scalar divisor (dividend) broadcast against a tile
    x = tl.load(x_ptr + offs, mask=offs < n, other=1)
    e = tl.load(e_ptr + offs, mask=offs < ne, other=1)
    base = j * (2 * n + 2 * ne)
    tl.store(out_ptr + base + offs, x // d, mask=offs < n)
    tl.store(out_ptr + base + n + offs, x % d, mask=offs < n)
    tl.store(out_ptr + base + 2 * n + offs, d // e, mask=offs < ne)
    tl.store(out_ptr + base + 2 * n + ne + offs, d % e, mask=offs < ne)


@pytest.mark.parametrize("dtype", INT_TYPES, ids=name)
def test_integer_divmod_tile_by_scalar_and_scalar_by_tile(dtype):
    xs = special_ints(dtype)
    ds = [v for v in xs if v not in (0, -1)]  # defined with any dividend
    n, ne = len(xs), len(ds)
    out = torch.empty(ne * (2 * n + 2 * ne), dtype=dtype, device=DEVICE)
    divmod_bcast_kernel[(ne,)](dev(ints(xs, dtype)), dev(ints(ds, dtype)), dev(ints(ds, dtype)), out, n, ne,
                               BLOCK=block_for(n))
    got = py(out)
    want = []
    for d in ds:
        want += [wrap(tdiv(x, d), dtype) for x in xs] + [wrap(trem(x, d), dtype) for x in xs]
        want += [wrap(tdiv(d, e), dtype) for e in ds] + [wrap(trem(d, e), dtype) for e in ds]
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not bad, f"{len(bad)} wrong, first at {bad[:4]}: got {[got[i] for i in bad[:4]]} want {[want[i] for i in bad[:4]]}"


def _const_divisors(dt):
    lo, hi = torch.iinfo(dt).min, torch.iinfo(dt).max
    if signed(dt):
        return [1, 2, 3, 7, 16, hi, -1, -2, -7, -16, lo]
    return [1, 2, 3, 7, 16, hi // 2 + 1, hi]


CONST_CASES = [(dt, d) for dt in INT_TYPES for d in _const_divisors(dt)]


@pytest.mark.parametrize("dtype,d", CONST_CASES, ids=[f"{name(dt)}-by{d}" for dt, d in CONST_CASES])
def test_integer_divmod_by_a_constant(dtype, d):
    """Division by a compile-time constant (where a compiler would use shifts and magic multipliers:
    signed division by a power of two must still truncate toward zero)."""
    lo = torch.iinfo(dtype).min
    xs = [v for v in special_ints(dtype) + random_ints(dtype, 64, 3) if not (signed(dtype) and v == lo and d == -1)]
    x = dev(ints(xs, dtype))
    q, r = torch.empty_like(x), torch.empty_like(x)
    divmod_const_kernel[(1,)](x, q, r, len(xs), D=d, BLOCK=block_for(len(xs)))
    assert py(q) == [wrap(tdiv(v, d), dtype) for v in xs]
    assert py(r) == [wrap(trem(v, d), dtype) for v in xs]


def test_undefined_division_does_not_crash():
    """x // 0, x % 0 and INT_MIN // -1 are undefined behaviour in Triton (arith.divsi/remsi/divui): any
    value is accepted, but a GPU does not trap on them, and neither may the simulator (a host SIGFPE
    would take the whole process down): the launch completes and the device keeps working."""
    for dt in (I8, I16, I32, I64, U32, U64):
        lo = torch.iinfo(dt).min
        d = -1 if lo else 0
        x = dev(ints([lo, 5, 0, lo, 7], dt))
        y = dev(ints([d, 0, 0, d, 0], dt))
        q, r = torch.empty_like(x), torch.empty_like(x)
        divmod_tile_kernel[(1,)](x, y, q, r, 5, BLOCK=16)
        divmod_scalar_kernel[(5,)](x, y, q, r)
        q.cpu(), r.cpu()
    x, y = dev(ints([7, -7], I32)), dev(ints([2, 2], I32))
    q, r = torch.empty_like(x), torch.empty_like(x)
    divmod_tile_kernel[(1,)](x, y, q, r, 2, BLOCK=16)
    assert (py(q), py(r)) == ([3, -3], [1, -1])


# == shifts ============================================================================================
@triton.jit
def shift_kernel(x_ptr, s_ptr, shl_ptr, shr_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    s = tl.load(s_ptr + offs, mask=m, other=0)
    tl.store(shl_ptr + offs, x << s, mask=m)
    tl.store(shr_ptr + offs, x >> s, mask=m)


@triton.jit
def shift_const_kernel(x_ptr, shl_ptr, shr_ptr, n, S: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    s = tl.cast(S, x.dtype)
    tl.store(shl_ptr + offs, x << s, mask=m)
    tl.store(shr_ptr + offs, x >> s, mask=m)


def _shift_ref(xs, ss, dt):
    # Python's >> on a negative int is arithmetic; unsigned values are non-negative: logical
    return [wrap(x << s, dt) for x, s in zip(xs, ss)], [wrap(x >> s, dt) for x, s in zip(xs, ss)]


@pytest.mark.parametrize("dtype", INT_TYPES, ids=name)
def test_shifts_every_amount(dtype):
    w = width(dtype)
    vals = special_ints(dtype) + random_ints(dtype, 6, 4)
    xs = [v for v in vals for _ in range(w)]
    ss = [s for _ in vals for s in range(w)]
    x, s = dev(ints(xs, dtype)), dev(ints(ss, dtype))
    shl, shr = torch.empty_like(x), torch.empty_like(x)
    shift_kernel[(triton.cdiv(len(xs), 256),)](x, s, shl, shr, len(xs), BLOCK=256)
    want_shl, want_shr = _shift_ref(xs, ss, dtype)
    assert py(shl) == want_shl
    assert py(shr) == want_shr


SHIFT_CONST_CASES = [(dt, s) for dt in INT_TYPES for s in sorted({0, 1, 3, width(dt) // 2, width(dt) - 1})]


@pytest.mark.parametrize("dtype,s", SHIFT_CONST_CASES, ids=[f"{name(dt)}-by{s}" for dt, s in SHIFT_CONST_CASES])
def test_shifts_by_a_constant(dtype, s):
    xs = special_ints(dtype) + random_ints(dtype, 32, 5)
    x = dev(ints(xs, dtype))
    shl, shr = torch.empty_like(x), torch.empty_like(x)
    shift_const_kernel[(1,)](x, shl, shr, len(xs), S=s, BLOCK=block_for(len(xs)))
    want_shl, want_shr = _shift_ref(xs, [s] * len(xs), dtype)
    assert py(shl) == want_shl
    assert py(shr) == want_shr


# == wrap-around, unsigned order, umulhi =================================================================
@triton.jit
def _int_ops(x, y, s, out_ptr, i, n, m):
    tl.store(out_ptr + i, x + y, mask=m)
    tl.store(out_ptr + n + i, x - y, mask=m)
    tl.store(out_ptr + 2 * n + i, x * y, mask=m)
    tl.store(out_ptr + 3 * n + i, -x, mask=m)
    tl.store(out_ptr + 4 * n + i, x * 3 + y * y - 1, mask=m)  # a chain, wrapping at every step
    tl.store(out_ptr + 5 * n + i, x << s, mask=m)
    tl.store(out_ptr + 6 * n + i, x >> s, mask=m)
    tl.store(out_ptr + 7 * n + i, tl.maximum(x, y), mask=m)  # signed or unsigned order by dtype
    tl.store(out_ptr + 8 * n + i, tl.minimum(x, y), mask=m)
    tl.store(out_ptr + 9 * n + i, (x < y).to(x.dtype) + (x >= y).to(x.dtype) * 2, mask=m)


@triton.jit
def int_ops_kernel(x_ptr, y_ptr, s_ptr, out_ptr, n, SCALAR: tl.constexpr, BLOCK: tl.constexpr):
    if SCALAR:  # one program per element: the scalar register path
        i = tl.program_id(0)
        _int_ops(tl.load(x_ptr + i), tl.load(y_ptr + i), tl.load(s_ptr + i), out_ptr, i, n, i < n)
    else:
        offs = tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0)
        y = tl.load(y_ptr + offs, mask=m, other=0)
        s = tl.load(s_ptr + offs, mask=m, other=0)
        _int_ops(x, y, s, out_ptr, offs, n, m)


def _int_ops_ref(a, b, s, dt):
    return [a + b, a - b, a * b, -a, a * 3 + b * b - 1, a << s, a >> s, max(a, b), min(a, b),
            (a < b) + 2 * (a >= b)]


OPS = ["add", "sub", "mul", "neg", "chain", "shl", "shr", "maximum", "minimum", "lt/ge"]


@pytest.mark.parametrize("form", ["tile", "scalar"])
@pytest.mark.parametrize("dtype", INT_TYPES, ids=name)
def test_wrap_around_shifts_and_order(dtype, form):
    """add, sub, mul, neg wrap modulo 2^w; shifts; max/min/compare in the dtype's own order (unsigned
    for uint: 2^w - 1 is the largest), on tiles and on scalars."""
    sp = special_ints(dtype)
    xs = [a for a in sp for _ in sp] + random_ints(dtype, 64, 6)
    ys = [b for _ in sp for b in sp] + random_ints(dtype, 64, 7)
    w = width(dtype)
    ss = [(i * 7) % w for i in range(len(xs))]
    n = len(xs)
    out = torch.empty(10 * n, dtype=dtype, device=DEVICE)
    scalar = form == "scalar"
    int_ops_kernel[(n if scalar else 1,)](dev(ints(xs, dtype)), dev(ints(ys, dtype)), dev(ints(ss, dtype)), out, n,
                                          SCALAR=scalar, BLOCK=block_for(n))
    got = py(out)
    want = [_int_ops_ref(a, b, c, dtype) for a, b, c in zip(xs, ys, ss)]
    for k, op in enumerate(OPS):
        row = [wrap(r[k], dtype) for r in want]
        bad = [(xs[i], ys[i], ss[i], g, r) for i, (g, r) in enumerate(zip(got[k * n:(k + 1) * n], row)) if g != r]
        assert not bad, f"{op}: {len(bad)} wrong (x, y, s, got, want), first: {bad[:4]}"


@triton.jit
def umulhi_kernel(x_ptr, y_ptr, out_ptr, n, SCALAR: tl.constexpr, BLOCK: tl.constexpr):
    if SCALAR:
        i = tl.program_id(0)
        tl.store(out_ptr + i, tl.umulhi(tl.load(x_ptr + i), tl.load(y_ptr + i)))
    else:
        offs = tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0)
        y = tl.load(y_ptr + offs, mask=m, other=0)
        tl.store(out_ptr + offs, tl.umulhi(x, y), mask=m)


@pytest.mark.parametrize("form", ["tile", "scalar"])
@pytest.mark.parametrize("dtype", [I32, U32, I64, U64], ids=name)
def test_umulhi(dtype, form):
    """The high half of the unsigned 2N-bit product (tt.mulhiui treats signed operands as unsigned,
    as CUDA's __umulhi / __umul64hi do)."""
    sp = special_ints(dtype)
    xs = [a for a in sp for _ in sp] + random_ints(dtype, 64, 8)
    ys = [b for _ in sp for b in sp] + random_ints(dtype, 64, 9)
    n, w = len(xs), width(dtype)
    out = torch.empty(n, dtype=dtype, device=DEVICE)
    scalar = form == "scalar"
    umulhi_kernel[(n if scalar else 1,)](dev(ints(xs, dtype)), dev(ints(ys, dtype)), out, n, SCALAR=scalar,
                                         BLOCK=block_for(n))
    M = (1 << w) - 1
    assert py(out) == [wrap(((a & M) * (b & M)) >> w, dtype) for a, b in zip(xs, ys)]


# == correctly rounded float ops =======================================================================
_FMT = {F16: (11, -14), BF16: (8, -126), F32: (24, -126), F64: (53, -1022)}  # (precision, min exponent)
_EMAX = {F16: 15, BF16: 127, F32: 127, F64: 1023}


def round_exact(q: Fraction, dt) -> float:
    """The exact rational q rounded to nearest-even in dt (subnormals included), as a Python float."""
    if q == 0:
        return 0.0
    p, emin = _FMT[dt]
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - p + 1)
    m = a / quantum
    k = m.numerator // m.denominator
    rest = m - k
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and k % 2):
        k += 1
    if k * quantum > (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** _EMAX[dt]:
        v = math.inf  # past the largest finite value after rounding: overflow
    else:
        v = float(k * quantum)
    return -v if q < 0 else v


def f32_patterns(n, seed, lo=0, hi=1 << 32):
    """n float32 values from random bit patterns in [lo, hi) (every binade, subnormals included)."""
    b = np.random.default_rng(seed).integers(lo, hi, n, dtype=np.uint64).astype(np.uint32)
    return torch.from_numpy(b.view(np.float32).copy())


def ulp_distance_f32(a, b):
    """|a - b| in f32 ulps, via the ordered integer encoding (NaN positions handled by the caller)."""
    ia = a.view(torch.int32).long()
    ib = b.view(torch.int32).long()
    ia = torch.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = torch.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return (ia - ib).abs()


def assert_same_f32(got, want):
    nan_g, nan_w = got.isnan(), want.isnan()
    assert torch.equal(nan_g, nan_w), f"NaN at {(nan_g != nan_w).nonzero().flatten()[:8].tolist()}"
    g, w = got[~nan_g], want[~nan_w]
    bad = (g.view(torch.int32) != w.view(torch.int32)).nonzero().flatten()
    assert bad.numel() == 0, (f"{bad.numel()} not correctly rounded, first got {g[bad[:4]].tolist()} "
                              f"want {w[bad[:4]].tolist()}")


@triton.jit
def fma_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m, other=0)
    b = tl.load(b_ptr + offs, mask=m, other=0)
    c = tl.load(c_ptr + offs, mask=m, other=0)
    tl.store(out_ptr + offs, tl.fma(a, b, c), mask=m)


def _fma_operands(dt, n=192, seed=10):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(n, generator=g) * 4).to(dt)
    b = (torch.randn(n, generator=g) * 4).to(dt)
    c = (torch.randn(n, generator=g) * 4).to(dt)
    # c = -round(a*b): a fused multiply-add leaves the rounding error of a*b, an unfused one 0
    third = n // 3
    c[:third] = -(a[:third].double() * b[:third].double()).to(dt)
    # near-ties: c tiny next to a*b, so a*b + c sits just off a rounding midpoint
    c[third:2 * third] = (a[third:2 * third].double() * b[third:2 * third].double() * 2.0 ** -30).to(dt)
    # a*b exactly halfway between two neighbours of dt and c a tiny nudge below it: rounding once goes
    # down; rounding a*b + c first to a wider type lands on the tie and goes to even, up
    p = _FMT[dt][0]
    tiny = {F16: 2.0 ** -24, BF16: 2.0 ** -24, F32: 2.0 ** -60, F64: 2.0 ** -200}[dt]
    ta = torch.tensor([1 + 2.0 ** (1 - p), -(1 + 2.0 ** (1 - p))], dtype=torch.float64).to(dt)
    tb = torch.tensor([1.5, 1.5], dtype=torch.float64).to(dt)
    tc = torch.tensor([-tiny, tiny], dtype=torch.float64).to(dt)
    return torch.cat([a, ta]), torch.cat([b, tb]), torch.cat([c, tc])


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=name)
def test_fma_rounds_once(dtype):
    a, b, c = _fma_operands(dtype)
    out = torch.empty_like(a, device=DEVICE)
    fma_kernel[(1,)](dev(a), dev(b), dev(c), out, a.numel(), BLOCK=256)
    want = torch.tensor([round_exact(Fraction(x) * Fraction(y) + Fraction(z), dtype)
                         for x, y, z in zip(a.double().tolist(), b.double().tolist(), c.double().tolist())],
                        dtype=torch.float64).to(dtype)
    got = out.cpu()
    bad = [i for i, (p, q) in enumerate(zip(fbits(got), fbits(want))) if p != q]
    assert not bad, (f"{len(bad)} of {a.numel()} not rounded once, first a={a[bad[0]].item()} b={b[bad[0]].item()} "
                     f"c={c[bad[0]].item()}: got {got[bad[0]].item()!r}, want {want[bad[0]].item()!r}")


@triton.jit
def div_sqrt_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    tl.store(out_ptr + offs, tl.div_rn(x, y), mask=m)
    tl.store(out_ptr + n + offs, tl.sqrt_rn(x), mask=m)
    tl.store(out_ptr + 2 * n + offs, x / y, mask=m)
    tl.store(out_ptr + 3 * n + offs, tl.sqrt(x), mask=m)


def _div_sqrt_operands():
    x = torch.cat([f32_patterns(700, 11, 0, 0x7F800000),           # positive finite, subnormals too
                   f32_patterns(100, 12),                            # anything: negatives, inf, NaN
                   torch.tensor([0.0, -0.0, 1.0, 4.0, 2.0, 0.25, 1e-45, 3.4028235e38, float("inf"),
                                 float("-inf"), float("nan"), -1.0, 9.0, 1.0000001, 0.99999994, 1e-40])])
    y = torch.cat([f32_patterns(700, 13, 0, 0x7F800000) * torch.where(torch.arange(700) % 2 == 0, 1.0, -1.0),
                   f32_patterns(100, 14),
                   torch.tensor([1.0, 1.0, 3.0, 2.0, 0.0, -0.0, 3.0, 0.5, 7.0, float("inf"), 2.0, 3.0, 1e-45,
                                 1e38, 3.0, 1e-40])])
    # exact squares (1 + k 2^-11)^2 and their f32 neighbours: sqrt exact or just off it; divided by a
    # divisor just below 2, odd significands give long expansions close to rounding boundaries
    k = torch.arange(1, 33, dtype=torch.float64)
    sq = ((1 + k * 2.0 ** -11) ** 2).float()
    near = torch.cat([sq, torch.nextafter(sq, torch.zeros_like(sq)), torch.nextafter(sq, sq * 2)])
    x = torch.cat([x, near])
    y = torch.cat([y, torch.full((96,), 2.0) - 2.0 ** -22])
    return x, y


def test_div_rn_and_sqrt_rn_are_correctly_rounded_and_fast_ones_within_triton_tolerance():
    x, y = _div_sqrt_operands()
    n = x.numel()
    out = torch.empty(4 * n, device=DEVICE)
    div_sqrt_kernel[(triton.cdiv(n, 256),)](dev(x), dev(y), out, n, BLOCK=256)
    got = out.cpu().view(4, n)
    xd, yd = x.double(), y.double()
    # float64 division/sqrt of f32 operands rounded to f32 is correctly rounded (53 >= 2*24 + 2)
    want_div = (xd / yd).float()
    want_sqrt = torch.sqrt(xd).float()
    assert_same_f32(got[0], want_div)
    assert_same_f32(got[1], want_sqrt)
    # `/` and tl.sqrt are Triton's fast versions (2 ulp on CUDA, subnormals may flush): normal results
    for g, w in ((got[2], want_div), (got[3], want_sqrt)):
        normal = w.isfinite() & (w.abs() >= torch.finfo(torch.float32).tiny)
        assert torch.equal(g.isnan(), w.isnan())
        assert int(ulp_distance_f32(g[normal], w[normal]).max()) <= 2


@triton.jit
def fmod_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    tl.store(out_ptr + offs, x % y, mask=m)


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=name)
def test_float_remainder_is_fmod(dtype):
    """Float `%` is arith.remf, C's fmod: exact, with the dividend's sign (-0.0 kept); x % 0, inf % y
    are NaN and x % inf is x. (f16/bf16 operands are computed in f32, where fmod is still exact.)"""
    nan, inf = float("nan"), float("inf")
    sp = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, -6.0, 3.0, 0.1, 1e-3, 1000.0, -1000.5, inf, -inf, nan]
    g = torch.Generator().manual_seed(23)
    xs = torch.tensor([a for a in sp for _ in sp] + (torch.randn(64, generator=g) * 100).tolist())
    ys = torch.tensor([b for _ in sp for b in sp] + (torch.randn(64, generator=g) * 3).tolist())
    xs, ys = xs.to(dtype), ys.to(dtype)
    n = xs.numel()
    out = torch.empty(n, dtype=dtype, device=DEVICE)
    fmod_kernel[(1,)](dev(xs), dev(ys), out, n, BLOCK=block_for(n))
    want = torch.fmod(xs.double(), ys.double()).to(dtype)
    got = out.cpu()
    assert torch.equal(got.isnan(), want.isnan())
    ok = ~want.isnan()
    bad = [(xs[i].item(), ys[i].item(), got[i].item(), want[i].item())
           for i in ok.nonzero().flatten().tolist() if fbits(got[i:i + 1]) != fbits(want[i:i + 1])]
    assert not bad, f"{len(bad)} wrong (x, y, got, want), first {bad[:4]}"


# == clamp, maximum/minimum and NaN ====================================================================
@triton.jit
def clamp_kernel(x_ptr, lo_ptr, hi_ptr, out_ptr, n, PROP: tl.constexpr, CONST_BOUNDS: tl.constexpr,
                 BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    if CONST_BOUNDS:
        lo = -1.5
        hi = 2.25
    else:
        lo = tl.load(lo_ptr + offs, mask=m, other=0)
        hi = tl.load(hi_ptr + offs, mask=m, other=0)
    if PROP:
        r = tl.clamp(x, lo, hi, propagate_nan=tl.PropagateNan.ALL)
    else:
        r = tl.clamp(x, lo, hi)
    tl.store(out_ptr + offs, r, mask=m)


CLAMP_CASES = [(dt, prop, const) for dt in FLOAT_TYPES for prop in (False, True) for const in (False, True)]


@pytest.mark.parametrize("dtype,prop,const", CLAMP_CASES,
                         ids=[f"{name(d)}-{'ALL' if p else 'NONE'}-{'const' if c else 'tensor'}"
                              for d, p, c in CLAMP_CASES])
def test_clamp_and_propagate_nan(dtype, prop, const):
    """NaN in x gives NaN with PropagateNan.ALL and the lower bound with NONE (minnum(maxnum(x, lo),
    hi), as Triton's GPU lowering); NaN bounds are undefined in Triton and not tested."""
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([-3.0, -1.5, -1.0, 0.5, 2.25, 3.0, nan, inf, -inf, 100.0, nan, 1.0, -2.0, 2.0, 0.75, -nan])
    lo = torch.tensor([-2.0, -2.0, -0.5, 0.0, 1.0, -4.0, -1.0, -1.0, -1.0, 2.0, 0.5, 1.0, -2.0, -3.0, 0.75, 0.25])
    hi = lo + torch.tensor([1.0, 3.0, 0.25, 1.0, 1.0, 8.0, 2.0, 2.0, 2.0, 0.5, 1.0, 0.0, 4.0, 9.0, 0.0, 3.0])
    x, lo, hi = x.to(dtype), lo.to(dtype), hi.to(dtype)
    out = torch.empty(16, dtype=dtype, device=DEVICE)
    clamp_kernel[(1,)](dev(x), dev(lo), dev(hi), out, 16, PROP=prop, CONST_BOUNDS=const, BLOCK=16)
    if const:
        lo, hi = torch.full_like(x, -1.5), torch.full_like(x, 2.25)
    want = torch.minimum(torch.maximum(x, lo), hi)  # torch propagates NaN
    if not prop:
        want = torch.where(x.isnan(), lo, want)
    got = out.cpu()
    assert torch.equal(got.isnan(), want.isnan()), (got, want)
    assert torch.equal(got[~got.isnan()], want[~want.isnan()]), (got, want)


@triton.jit
def minmax_kernel(x_ptr, y_ptr, out_ptr, n, PROP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    y = tl.load(y_ptr + offs, mask=m, other=0)
    if PROP:
        mx = tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL)
        mn = tl.minimum(x, y, propagate_nan=tl.PropagateNan.ALL)
    else:
        mx = tl.maximum(x, y)
        mn = tl.minimum(x, y)
    tl.store(out_ptr + offs, mx, mask=m)
    tl.store(out_ptr + n + offs, mn, mask=m)


def _ieee_maximum(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0:
        return 0.0 if not (math.copysign(1, a) < 0 and math.copysign(1, b) < 0) else -0.0
    return max(a, b)


def _ieee_minimum(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0:
        return -0.0 if (math.copysign(1, a) < 0 or math.copysign(1, b) < 0) else 0.0
    return min(a, b)


MINMAX_CASES = [(dt, prop) for dt in FLOAT_TYPES for prop in (False, True)]


@pytest.mark.parametrize("dtype,prop", MINMAX_CASES,
                         ids=[f"{name(d)}-{'ALL' if p else 'NONE'}" for d, p in MINMAX_CASES])
def test_maximum_minimum_nan_and_signed_zero(dtype, prop):
    """NONE (the default) is maxnum/minnum: a NaN operand loses to a number. ALL is IEEE maximum/
    minimum: NaN wins, and -0.0 < +0.0. (maxnum of +-0 may return either zero: not checked.)"""
    nan, inf = float("nan"), float("inf")
    vals = [nan, -inf, -2.5, -1.0, -0.0, 0.0, 1.0, 3.0, inf]
    xs = torch.tensor([a for a in vals for _ in vals]).to(dtype)
    ys = torch.tensor([b for _ in vals for b in vals]).to(dtype)
    n = xs.numel()
    out = torch.empty(2 * n, dtype=dtype, device=DEVICE)
    minmax_kernel[(1,)](dev(xs), dev(ys), out, n, PROP=prop, BLOCK=block_for(n))
    got = out.cpu().view(2, n).double()
    x, y = xs.double(), ys.double()
    if prop:
        want = torch.tensor([[_ieee_maximum(a, b) for a, b in zip(x.tolist(), y.tolist())],
                             [_ieee_minimum(a, b) for a, b in zip(x.tolist(), y.tolist())]], dtype=torch.float64)
        check = torch.ones(n, dtype=torch.bool)
    else:
        want = torch.stack([torch.fmax(x, y), torch.fmin(x, y)])  # fmax/fmin: NaN loses
        check = ~((x == 0) & (y == 0))
    for k in range(2):
        g, w = got[k][check], want[k][check]
        assert torch.equal(g.isnan(), w.isnan()), (k, g, w)
        ok = ~g.isnan()
        assert torch.equal(g[ok], w[ok]) and torch.equal(torch.signbit(g[ok]), torch.signbit(w[ok])), (k, g, w)


@triton.jit
def _max_propagating(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _min_propagating(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def nan_reduce_kernel(x_ptr, out_ptr, R: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, R)
    x = tl.load(x_ptr + rows[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + rows, tl.max(x, axis=1))
    tl.store(out_ptr + R + rows, tl.min(x, axis=1))
    tl.store(out_ptr + 2 * R + rows, tl.reduce(x, 1, _max_propagating))
    tl.store(out_ptr + 3 * R + rows, tl.reduce(x, 1, _min_propagating))


@pytest.mark.parametrize("dtype", [F16, F32, F64], ids=name)
def test_max_min_reductions_with_nan(dtype):
    """tl.max/tl.min combine with tl.maximum/tl.minimum (PropagateNan.NONE): NaNs are ignored unless a
    row is all NaN; a combine with PropagateNan.ALL gives NaN for any NaN in the row."""
    nan, inf = float("nan"), float("inf")
    R, N = 8, 32
    g = torch.Generator().manual_seed(15)
    x = torch.randn(R, N, generator=g).double()
    x[1, 0] = nan                       # first
    x[2, 17] = nan                      # middle
    x[3, N - 1] = nan                   # last
    x[4, :] = nan                       # all
    x[5, ::2] = nan                     # every other, the others -inf
    x[5, 1::2] = -inf
    x[6, 3], x[6, 9] = inf, nan         # inf and NaN
    x[7, :] = -inf
    x[7, 5] = nan
    x = x.to(dtype)
    out = torch.empty(4 * R, dtype=dtype, device=DEVICE)
    nan_reduce_kernel[(1,)](dev(x), out, R=R, N=N)
    got = out.cpu().view(4, R).double()
    xd = x.double()
    has_nan = xd.isnan().any(1)
    masked_hi = torch.where(xd.isnan(), -inf, xd).amax(1)
    masked_lo = torch.where(xd.isnan(), inf, xd).amin(1)
    all_nan = xd.isnan().all(1)
    want = torch.stack([torch.where(all_nan, nan, masked_hi), torch.where(all_nan, nan, masked_lo),
                        torch.where(has_nan, nan, masked_hi), torch.where(has_nan, nan, masked_lo)])
    for k, what in enumerate(["tl.max", "tl.min", "reduce(maximum ALL)", "reduce(minimum ALL)"]):
        assert torch.equal(got[k].isnan(), want[k].isnan()), (what, got[k], want[k])
        ok = ~want[k].isnan()
        assert torch.equal(got[k][ok], want[k][ok]), (what, got[k], want[k])


# == integer and float conversions ====================================================================
@triton.jit
def _cast_store(ptr, x, offs, m):
    tl.store(ptr + offs, x.to(ptr.dtype.element_ty), mask=m)


@triton.jit
def int_convert_kernel(x_ptr, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    _cast_store(i8, x, offs, m)
    _cast_store(i16, x, offs, m)
    _cast_store(i32, x, offs, m)
    _cast_store(i64, x, offs, m)
    _cast_store(u8, x, offs, m)
    _cast_store(u16, x, offs, m)
    _cast_store(u32, x, offs, m)
    _cast_store(u64, x, offs, m)
    _cast_store(f16, x, offs, m)
    _cast_store(bf16, x, offs, m)
    _cast_store(f32, x, offs, m)
    _cast_store(f64, x, offs, m)


def _rounding_probes(dt):
    """Integers next to the rounding midpoints of every float type that dt's range reaches: a midpoint
    itself (ties to even) and one either side (a conversion through a wider float rounds twice)."""
    lo, hi = torch.iinfo(dt).min, torch.iinfo(dt).max
    out = []
    for p in (8, 11, 24, 53):
        for k in range(p + 1, width(dt)):
            for mid in (2 ** k + 2 ** (k - p), 2 ** k + 3 * 2 ** (k - p), 2 ** (k + 1) - 2 ** (k - p)):
                for v in (mid - 1, mid, mid + 1):
                    for sv in (v, -v):
                        if lo <= sv <= hi:
                            out.append(sv)
    return out


@pytest.mark.parametrize("src", INT_TYPES, ids=name)
def test_integer_conversions_to_every_integer_and_float_type(src):
    """int -> int: sign extension of signed sources, zero extension of unsigned ones, truncation;
    int -> float: one rounding to nearest even of the exact value (sitofp/uitofp), overflow to inf."""
    xs = sorted(set(special_ints(src) + random_ints(src, 64, 21) + _rounding_probes(src)))
    n = len(xs)
    outs = {dt: torch.empty(n, dtype=dt, device=DEVICE) for dt in INT_TYPES + FLOAT_TYPES}
    int_convert_kernel[(triton.cdiv(n, 512),)](dev(ints(xs, src)), *outs.values(), n, BLOCK=512)
    for dt in INT_TYPES:
        got = py(outs[dt])
        bad = [(x, g, wrap(x, dt)) for x, g in zip(xs, got) if g != wrap(x, dt)]
        assert not bad, f"-> {name(dt)}: {len(bad)} wrong (x, got, want), first {bad[:4]}"
    for dt in FLOAT_TYPES:
        got = outs[dt].cpu().double().tolist()
        want = [round_exact(Fraction(x), dt) for x in xs]
        bad = [(x, g, w) for x, g, w in zip(xs, got, want) if g != w]
        assert not bad, f"-> {name(dt)}: {len(bad)} not rounded once to nearest (x, got, want), first {bad[:4]}"


@triton.jit
def float_to_int_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m, other=0).to(out_ptr.dtype.element_ty), mask=m)


F2I_CASES = [(s, d) for s in FLOAT_TYPES for d in INT_TYPES]


@pytest.mark.parametrize("src,dst", F2I_CASES, ids=[f"{name(s)}-{name(d)}" for s, d in F2I_CASES])
def test_float_to_integer_truncates(src, dst):
    """fptosi/fptoui: toward zero, for every value whose truncation fits dst (others are undefined in
    Triton), up to the largest float below 2^w for unsigned and the extremes for signed."""
    lo, hi = torch.iinfo(dst).min, torch.iinfo(dst).max
    g = torch.Generator().manual_seed(22)
    cand = [0.0, -0.0, 0.7, -0.7, 2.5, -2.5, 3.99, -3.99, 100.5, -100.5, 126.9, -127.9, float(lo), float(hi)]
    cand += (torch.rand(96, generator=g, dtype=torch.float64) * (hi - lo) + lo).tolist()
    vals = torch.tensor(cand, dtype=torch.float64).to(src)
    # the largest values of src at or below hi, and the smallest at or above lo
    top = torch.tensor([float(hi)], dtype=torch.float64).to(src)
    while not top.double().item() <= hi:  # one ulp down (positive: the bit pattern minus one)
        st = _SIGNED_OF[top.element_size()]
        top = (top.view(st) - 1).view(src)
    vals = torch.cat([vals, top, -top if lo < 0 else top])
    keep = [i for i, v in enumerate(vals.double().tolist()) if math.isfinite(v) and lo <= math.trunc(v) <= hi]
    vals = vals[keep]
    n = vals.numel()
    out = torch.empty(n, dtype=dst, device=DEVICE)
    float_to_int_kernel[(1,)](dev(vals), out, n, BLOCK=block_for(n))
    want = [math.trunc(v) for v in vals.double().tolist()]
    got = py(out)
    bad = [(v, g_, w) for v, g_, w in zip(vals.double().tolist(), got, want) if g_ != w]
    assert not bad, f"{len(bad)} wrong (x, got, want), first {bad[:4]}"


# == bitcasts ==========================================================================================
@triton.jit
def bitcast_kernel(x_ptr, out_ptr, n, SCALAR: tl.constexpr, BLOCK: tl.constexpr):
    dst: tl.constexpr = out_ptr.dtype.element_ty
    if SCALAR:
        i = tl.program_id(0)
        tl.store(out_ptr + i, tl.load(x_ptr + i).to(dst, bitcast=True))
    else:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(out_ptr + offs, tl.cast(x, dst, bitcast=True), mask=m)
        tl.store(out_ptr + n + offs, x.to(dst, bitcast=True), mask=m)
        # there, back and there again
        tl.store(out_ptr + 2 * n + offs, x.to(dst, bitcast=True).to(x.dtype, bitcast=True).to(dst, bitcast=True),
                 mask=m)


FP8E4, FP8E5 = torch.float8_e4m3fn, torch.float8_e5m2
BITCAST_PAIRS = [(F32, I32), (F32, U32), (I32, F32), (U32, F32), (F16, I16), (I16, F16), (BF16, I16), (I16, BF16),
                 (F16, BF16), (BF16, F16), (F16, U16), (F64, I64), (I64, F64), (U64, F64), (F64, U64), (I8, U8),
                 (U8, I8), (I16, U16), (I32, U32), (U64, I64), (FP8E4, I8), (U8, FP8E4), (FP8E5, U8), (I8, FP8E5),
                 (FP8E4, FP8E5)]
BITCAST_CASES = [(s, d, f) for s, d in BITCAST_PAIRS for f in ("tile", "scalar")]


def _bit_patterns(dt, n=300, seed=16):
    """Every byte value for 8-bit types; else random patterns plus NaN payloads (signalling too), -0,
    infinities, subnormals and the extremes."""
    es = torch.empty((), dtype=dt).element_size()
    w = 8 * es
    if w == 8:
        pats = list(range(256))
    else:
        pats = [int(v) for v in np.random.default_rng(seed).integers(0, 1 << w, n, dtype=np.uint64)]
        e = {16: 5, 32: 8, 64: 11}[w]  # f16-like layouts; enough to hit the special encodings
        m = w - 1 - e
        top = ((1 << e) - 1) << m
        pats += [0, 1 << (w - 1), top, top | 1, top | (1 << (m - 1)), top | 1 | 1 << (w - 1), 1, (1 << m) - 1,
                 (1 << w) - 1, (1 << (w - 1)) - 1, 0x7F81, 0xFF80, 0x7FC1 << (w - 16)]
    return [p & ((1 << w) - 1) for p in pats]


@pytest.mark.parametrize("src,dst,form", BITCAST_CASES, ids=[f"{name(s)}-{name(d)}-{f}" for s, d, f in BITCAST_CASES])
def test_bitcast_keeps_every_bit(src, dst, form):
    """tl.cast(x, T, bitcast=True), x.to(T, bitcast=True) and a round trip on tiles, and a bitcast
    scalar: every bit kept, NaN payloads and signalling NaNs included."""
    pats = _bit_patterns(src)
    n = len(pats)
    es = torch.empty((), dtype=src).element_size()
    x = ints(pats, _SIGNED_OF[es]).view(src)
    copies = 1 if form == "scalar" else 3
    out = torch.empty(copies * n, dtype=dst, device=DEVICE)
    grid = (n,) if form == "scalar" else (triton.cdiv(n, 256),)
    bitcast_kernel[grid](dev(x), out, n, SCALAR=form == "scalar", BLOCK=256)
    got = [v & ((1 << 8 * es) - 1) for v in out.cpu().view(_SIGNED_OF[es]).tolist()]
    for k, what in enumerate(["tl.cast", ".to", "round trip"][:copies]):
        bad = [(hex(p), hex(g)) for p, g in zip(pats, got[k * n:(k + 1) * n]) if p != g]
        assert not bad, f"{what}: {len(bad)} patterns changed, first (in, out): {bad[:6]}"


# == i1 =================================================================================================
@triton.jit
def bool_kernel(a_ptr, b_ptr, x_ptr, bout_ptr, iout_ptr, fout_ptr, red_ptr, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)  # bool pointers: loaded as bytes, then != 0
    b = tl.load(b_ptr + offs)
    x = tl.load(x_ptr + offs)
    tl.store(bout_ptr + 0 * BLOCK + offs, a & b)
    tl.store(bout_ptr + 1 * BLOCK + offs, a | b)
    tl.store(bout_ptr + 2 * BLOCK + offs, a ^ b)
    tl.store(bout_ptr + 3 * BLOCK + offs, ~a)
    tl.store(bout_ptr + 4 * BLOCK + offs, a == b)
    tl.store(bout_ptr + 5 * BLOCK + offs, a < b)
    tl.store(bout_ptr + 6 * BLOCK + offs, (x > 0) & flag)
    tl.store(bout_ptr + 7 * BLOCK + offs, tl.where(a, x > 5, b))
    tl.store(bout_ptr + 8 * BLOCK + offs, x.to(tl.int1))
    tl.store(bout_ptr + 9 * BLOCK + offs, a)  # a byte of 2 or 255 comes back as 1
    tl.store(iout_ptr + 0 * BLOCK + offs, a.to(tl.int32))
    tl.store(iout_ptr + 1 * BLOCK + offs, a)  # implicit i1 -> i32 on store: 1, not -1
    tl.store(iout_ptr + 2 * BLOCK + offs, tl.where(a, x, -x))
    tl.store(iout_ptr + 3 * BLOCK + offs, a.to(tl.int8).to(tl.int32))
    tl.store(iout_ptr + 4 * BLOCK + offs, (a != b).to(tl.int32) * 2 - 1)
    tl.store(iout_ptr + 5 * BLOCK + offs, tl.where(flag, x, 0))
    tl.store(fout_ptr + offs, a.to(tl.float32))
    tl.store(fout_ptr + BLOCK + offs, tl.where(a, 0.5, -1.0))
    tl.store(red_ptr + 0, tl.sum(a, axis=0).to(tl.int32))  # a count
    tl.store(red_ptr + 1, tl.max(a, axis=0).to(tl.int32))  # any
    tl.store(red_ptr + 2, tl.min(a, axis=0).to(tl.int32))  # all
    tl.store(red_ptr + 3, tl.sum(a.to(tl.int32) * x, axis=0))
    tl.store(red_ptr + 4, tl.sum((a & (x > 3)).to(tl.int32), axis=0))


@pytest.mark.parametrize("pattern", ["random", "all_true", "all_false"])
@pytest.mark.parametrize("flag", [True, False])
def test_i1_values(pattern, flag):
    B = 64
    g = torch.Generator().manual_seed(17)
    raw = torch.randint(0, 2, (B,), generator=g, dtype=torch.uint8) * torch.tensor([1, 2, 255, 1] * 16,
                                                                                  dtype=torch.uint8)
    if pattern == "all_true":
        raw = torch.full((B,), 1, dtype=torch.uint8)
    elif pattern == "all_false":
        raw = torch.zeros(B, dtype=torch.uint8)
    a_raw = raw.view(torch.bool)  # bytes 0, 1, 2, 255
    a = raw != 0
    b = torch.randint(0, 2, (B,), generator=g).bool()
    x = torch.randint(-10, 11, (B,), generator=g, dtype=torch.int32)
    bout = torch.empty(10 * B, dtype=torch.bool, device=DEVICE)
    iout = torch.empty(6 * B, dtype=torch.int32, device=DEVICE)
    fout = torch.empty(2 * B, dtype=torch.float32, device=DEVICE)
    red = torch.empty(5, dtype=torch.int32, device=DEVICE)
    bool_kernel[(1,)](dev(a_raw), dev(b), dev(x), bout, iout, fout, red, flag, BLOCK=B)
    want_b = torch.stack([a & b, a | b, a ^ b, ~a, a == b, a < b, (x > 0) & flag, torch.where(a, x > 5, b), x != 0, a])
    assert torch.equal(bout.cpu().view(torch.uint8).view(10, B), want_b.to(torch.uint8))  # bytes 0 and 1 only
    ai = a.int()
    want_i = torch.stack([ai, ai, torch.where(a, x, -x), ai, (a != b).int() * 2 - 1, x if flag else torch.zeros_like(x)])
    assert torch.equal(iout.cpu().view(6, B), want_i)
    assert torch.equal(fout.cpu().view(2, B), torch.stack([a.float(), torch.where(a, 0.5, -1.0)]))
    want_red = [int(a.sum()), int(a.any()), int(a.all()), int((ai * x).sum()), int((a & (x > 3)).sum())]
    assert red.cpu().tolist() == want_red


# == cache modifiers, eviction policies, volatile ======================================================
@triton.jit
def cache_kernel(x_ptr, out_ptr, n, LCM: tl.constexpr, LEV: tl.constexpr, VOL: tl.constexpr, SCM: tl.constexpr,
                 SEV: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=-7.0, cache_modifier=LCM, eviction_policy=LEV, volatile=VOL)
    s = tl.load(x_ptr + 1, cache_modifier=LCM, eviction_policy=LEV, volatile=VOL)  # a scalar load too
    tl.store(out_ptr + offs, x * 2 + s, mask=m, cache_modifier=SCM, eviction_policy=SEV)


CACHE_CASES = [
    ("", "", False, "", ""),
    (".ca", "", False, "", ""),
    (".cg", "", False, "", ""),
    (".cv", "", False, "", ""),
    ("", "evict_first", False, "", ""),
    ("", "evict_last", False, "", ""),
    ("", "", True, "", ""),
    (".cv", "evict_first", True, "", ""),
    (".ca", "evict_last", True, "", ""),
    ("", "", False, ".wb", ""),
    ("", "", False, ".cg", "evict_first"),
    ("", "", False, ".cs", "evict_last"),
    ("", "", False, ".wt", ""),
    (".cg", "evict_last", False, ".cs", "evict_first"),
]


@pytest.mark.parametrize("lcm,lev,vol,scm,sev", CACHE_CASES,
                         ids=["-".join(str(v).strip(".") or "_" for v in c) for c in CACHE_CASES])
def test_cache_modifiers_eviction_policies_and_volatile(lcm, lev, vol, scm, sev):
    x = torch.randn(300, generator=torch.Generator().manual_seed(18))
    out = torch.full((300,), 99.0, device=DEVICE)
    cache_kernel[(3,)](dev(x), out, 290, LCM=lcm, LEV=lev, VOL=vol, SCM=scm, SEV=sev, BLOCK=128)
    want = torch.cat([x[:290] * 2 + x[1], torch.full((10,), 99.0)])
    assert torch.equal(out.cpu(), want)


@triton.jit
def volatile_poll_kernel(flag_ptr, out_ptr):
    # program 0 publishes, the others spin on a volatile load until they see it (programs run
    # concurrently on the cores): a load hoisted out of the loop would never finish
    pid = tl.program_id(0)
    if pid == 0:
        tl.atomic_xchg(flag_ptr, 1)
    else:
        seen = tl.load(flag_ptr, volatile=True)
        tries = 0
        while (seen == 0) & (tries < 4000000):  # bounded: a broken volatile fails instead of hanging
            seen = tl.load(flag_ptr, volatile=True)
            tries += 1
        tl.store(out_ptr + pid, seen + pid)


def test_volatile_load_in_a_spin_loop_sees_another_program_store():
    flag = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    out = torch.zeros(8, dtype=torch.int32, device=DEVICE)
    volatile_poll_kernel[(8,)](flag, out)
    assert out.cpu().tolist() == [0] + [1 + p for p in range(1, 8)]


# == scalar loads and stores ===========================================================================
@triton.jit
def scalar_copy_kernel(x_ptr, out_ptr, n, other, EXTRA: tl.constexpr):
    i = tl.program_id(0)
    v = tl.load(x_ptr + i, mask=i < n, other=other)  # masked off: must not read past the allocation
    tl.store(out_ptr + i, v)
    tl.store(out_ptr + n + EXTRA + i, tl.load(x_ptr + (i * 7) % n))  # unmasked, a computed address
    tl.store(out_ptr + 2 * (n + EXTRA), v, mask=i == n - 1)  # a scalar store under a scalar mask
    tl.store(out_ptr + 1000000 + i, v, mask=i < 0)  # masked off, far past the allocation: no access


SCALAR_DTYPES = INT_TYPES + FLOAT_TYPES + [torch.bool, FP8E4, FP8E5]


@pytest.mark.parametrize("dtype", SCALAR_DTYPES, ids=name)
def test_scalar_loads_and_stores(dtype):
    n = 20
    es = torch.empty((), dtype=dtype).element_size()
    if dtype == torch.bool:
        x = torch.arange(n) % 3 == 0
        other = True
    elif dtype.is_floating_point:
        x = (torch.randn(n, generator=torch.Generator().manual_seed(19)) * 8).to(dtype)
        other = -3.0
    else:
        x = ints(random_ints(dtype, n, 19), dtype)
        other = 5
    E = 4  # programs n .. n + E - 1 load masked off, past the end of x
    out = torch.zeros(2 * (n + E) + 1, dtype=dtype, device=DEVICE)
    scalar_copy_kernel[(n + E,)](dev(x), out, n, other, EXTRA=E)
    got = out.cpu().view(_SIGNED_OF[es])
    xi = x.view(_SIGNED_OF[es])
    oth = torch.tensor([other], dtype=dtype).view(_SIGNED_OF[es])
    assert torch.equal(got[:n + E], torch.cat([xi, oth.expand(E)]))
    assert torch.equal(got[n + E:2 * (n + E)], xi[torch.tensor([(i * 7) % n for i in range(n + E)])])
    assert got[-1] == xi[n - 1]


# == pointers loaded from memory =======================================================================
@triton.jit
def pointer_table_kernel(tbl_ptr, len_ptr, BLOCK: tl.constexpr):
    """Program i doubles tensor i in place, reached through its address loaded from a table."""
    i = tl.program_id(0)
    p = tl.load(tbl_ptr + i).to(tl.pointer_type(tl.float32))  # an int64 address as a pointer
    n = tl.load(len_ptr + i)
    offs = tl.arange(0, BLOCK)
    x = tl.load(p + offs, mask=offs < n)
    tl.store(p + offs, x * 2 + i, mask=offs < n)


@triton.jit
def pointer_of_pointers_kernel(tbl_ptr, out_ptr, BLOCK: tl.constexpr):
    """The table typed as pointers to pointers: tl.load returns a pointer (and a block of them)."""
    pp = tbl_ptr.to(tl.pointer_type(tl.pointer_type(tl.int32)), bitcast=True)
    i = tl.program_id(0)
    p = tl.load(pp + i)
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + i * BLOCK + offs, tl.load(p + offs))


@triton.jit
def gather_through_pointers_kernel(addr_ptr, out_ptr, self_ptr, x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    ptrs = tl.load(addr_ptr + offs).to(tl.pointer_type(tl.float32))  # a block of loaded pointers
    tl.store(out_ptr + offs, tl.load(ptrs))
    tl.store(ptrs, offs.to(tl.float32) + 0.5)  # and a scatter through them
    tl.store(self_ptr, x_ptr.to(tl.int64))  # pointer -> int
    q = tl.cast(tl.load(self_ptr), tl.pointer_type(tl.float32))  # int -> pointer
    tl.store(self_ptr + 1, tl.load(q + 3).to(tl.int32, bitcast=True).to(tl.int64))


def test_table_of_pointers_loaded_as_int64():
    sizes = [5, 64, 1, 33]
    ts = [dev(torch.arange(s, dtype=torch.float32) - 3) for s in sizes]
    tbl = dev(torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64))
    lens = dev(torch.tensor(sizes, dtype=torch.int32))
    pointer_table_kernel[(len(sizes),)](tbl, lens, BLOCK=64)
    for i, (s, t) in enumerate(zip(sizes, ts)):
        assert torch.equal(t.cpu(), (torch.arange(s, dtype=torch.float32) - 3) * 2 + i)


def test_pointers_to_pointers():
    ts = [dev(torch.arange(16, dtype=torch.int32) * (k + 1)) for k in range(3)]
    tbl = dev(torch.tensor([ts[2].data_ptr(), ts[0].data_ptr(), ts[1].data_ptr()], dtype=torch.int64))
    out = torch.empty(48, dtype=torch.int32, device=DEVICE)
    pointer_of_pointers_kernel[(3,)](tbl, out, BLOCK=16)
    assert torch.equal(out.cpu(), torch.cat([ts[2].cpu(), ts[0].cpu(), ts[1].cpu()]))


def test_block_of_loaded_pointers_gathers_and_scatters():
    B = 32
    x = dev(torch.arange(100, dtype=torch.float32) * 1.5)
    perm = torch.randperm(100, generator=torch.Generator().manual_seed(20))[:B]
    addrs = dev(torch.tensor([x.data_ptr() + 4 * int(j) for j in perm], dtype=torch.int64))
    out = torch.empty(B, device=DEVICE)
    self_ = torch.zeros(2, dtype=torch.int64, device=DEVICE)
    before = x.cpu().clone()
    gather_through_pointers_kernel[(1,)](addrs, out, self_, x, BLOCK=B)
    assert torch.equal(out.cpu(), before[perm])
    want = before.clone()
    want[perm] = torch.arange(B, dtype=torch.float32) + 0.5
    assert torch.equal(x.cpu(), want)
    got = self_.cpu().tolist()
    assert got[0] == x.data_ptr()
    assert got[1] == int(torch.tensor([want[3].item()]).view(torch.int32).item())
