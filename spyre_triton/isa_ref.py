"""What each Spyre instruction computes, as plain NumPy: the executable definition of docs/isa.md.

The C interpreter's typed loops are the fast implementation; this module is the slow, obvious one
that tests hold them to, bit for bit. Values travel as their storage bits (isa.DTYPES): integers
as unsigned integers of their width, i1 as 0/1 bytes, floats as their bit patterns. A float
operation decodes to its compute type (f32 for f16 and bf16, else itself), computes, and rounds
back; the NaN rules are the ones isa.py states.

    ref = isa_ref.elementwise("add", "f16", [a_bits, b_bits])           # the result's bits
    ref = isa_ref.red("maximum", "f32", src_bits, outer, length, inner)

`elementwise` covers every opcode of the vector unit that works element by element (isa.OPCODES
with cost class vector or divide), `const`, `iota` and `copy` the ones that make or move a tile, and
the SFU functions that are exact (ROUNDING_MATH1); the
transcendental SFU functions are polynomial approximations whose reference is libm within a
tolerance (tests/test_vmath.py), not a bit pattern.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from . import isa

UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
# the exact SFU functions: results are bit-exact roundings, not approximations
ROUNDING_MATH1 = ("floor", "ceil", "trunc", "rint", "nearbyint", "abs", "neg", "signbit", "isnan", "isinf",
                  "isfinite", "sqrt")


def storage(t: str):
    """The numpy dtype holding dtype t's bits."""
    return UINT[isa.DTYPE_BY_NAME[t].nbytes]


def _bits_of(t: str) -> int:
    return 1 if t == "i1" else 8 * isa.DTYPE_BY_NAME[t].nbytes


# ---------------------------------------------------------------------------------------------
# integers: Python ints, wrapped to the width (signless storage; signedness is the opcode's)
# ---------------------------------------------------------------------------------------------
def _u(x: int, bits: int) -> int:
    return int(x) & ((1 << bits) - 1)


def _s(x: int, bits: int) -> int:
    x = _u(x, bits)
    return x - (1 << bits) if x >> (bits - 1) else x


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


_INT_BINARY = {
    "add": lambda a, b, w: _u(a, w) + _u(b, w),
    "sub": lambda a, b, w: _u(a, w) - _u(b, w),
    "mul": lambda a, b, w: _u(a, w) * _u(b, w),
    # division by zero gives 0; x / -1 is the wrapped negation (no trap at the minimum)
    "divs": lambda a, b, w: 0 if _s(b, w) == 0 else _tdiv(_s(a, w), _s(b, w)),
    "rems": lambda a, b, w: 0 if _s(b, w) in (0, -1) else _s(a, w) - _s(b, w) * _tdiv(_s(a, w), _s(b, w)),
    "divu": lambda a, b, w: 0 if _u(b, w) == 0 else _u(a, w) // _u(b, w),
    "remu": lambda a, b, w: 0 if _u(b, w) == 0 else _u(a, w) % _u(b, w),
    "and": lambda a, b, w: _u(a, w) & _u(b, w),
    "or": lambda a, b, w: _u(a, w) | _u(b, w),
    "xor": lambda a, b, w: _u(a, w) ^ _u(b, w),
    "shl": lambda a, b, w: 0 if _u(b, w) >= w else _u(a, w) << _u(b, w),
    "shrs": lambda a, b, w: _s(a, w) >> min(_u(b, w), w - 1),
    "shru": lambda a, b, w: 0 if _u(b, w) >= w else _u(a, w) >> _u(b, w),
    "maxs": lambda a, b, w: max(_s(a, w), _s(b, w)),
    "mins": lambda a, b, w: min(_s(a, w), _s(b, w)),
    "maxu": lambda a, b, w: max(_u(a, w), _u(b, w)),
    "minu": lambda a, b, w: min(_u(a, w), _u(b, w)),
    "mulhis": lambda a, b, w: (_s(a, w) * _s(b, w)) >> w,
    "mulhiu": lambda a, b, w: (_u(a, w) * _u(b, w)) >> w,
}
_INT_UNARY = {
    "absi": lambda a, w: abs(_s(a, w)),
    "ctpop": lambda a, w: bin(_u(a, w)).count("1"),
    "ctlz": lambda a, w: w - _u(a, w).bit_length(),
    "cttz": lambda a, w: w if _u(a, w) == 0 else (_u(a, w) & -_u(a, w)).bit_length() - 1,
}
_ICMP = {
    "eq": lambda a, b, w: _u(a, w) == _u(b, w), "ne": lambda a, b, w: _u(a, w) != _u(b, w),
    "slt": lambda a, b, w: _s(a, w) < _s(b, w), "sle": lambda a, b, w: _s(a, w) <= _s(b, w),
    "sgt": lambda a, b, w: _s(a, w) > _s(b, w), "sge": lambda a, b, w: _s(a, w) >= _s(b, w),
    "ult": lambda a, b, w: _u(a, w) < _u(b, w), "ule": lambda a, b, w: _u(a, w) <= _u(b, w),
    "ugt": lambda a, b, w: _u(a, w) > _u(b, w), "uge": lambda a, b, w: _u(a, w) >= _u(b, w),
}


# ---------------------------------------------------------------------------------------------
# floats: decode the bits to the compute type, round the result back (isa.FloatFormat)
# ---------------------------------------------------------------------------------------------
def compute_type(t: str):
    return np.float64 if t == "f64" else np.float32


def decode(t: str, bits: np.ndarray) -> np.ndarray:
    """Storage bits of float dtype t -> values of its compute type (exact)."""
    bits = np.asarray(bits, dtype=storage(t))
    if t == "f16":
        return bits.view(np.float16).astype(np.float32)
    if t == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return bits.view(compute_type(t))


def _quiet(t: str) -> int:
    fmt = isa.DTYPE_BY_NAME[t].fmt
    return 1 << (fmt.mbits - 1)


def encode(t: str, x: np.ndarray) -> np.ndarray:
    """Compute-type values -> storage bits of float dtype t, rounding to nearest even. A NaN keeps
    its sign and the top bits of its payload, with the quiet bit set."""
    x = np.asarray(x, dtype=compute_type(t))
    if t in ("f32", "f64"):
        return x.view(storage(t)).copy()
    u = x.view(np.uint32).astype(np.uint64)
    nan = np.isnan(x)
    if t == "bf16":
        rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return np.where(nan, (u >> 16) | _quiet(t), rounded).astype(np.uint16)
    with np.errstate(over="ignore"):
        rounded = x.astype(np.float16).view(np.uint16)
    nan_bits = ((u >> 16) & 0x8000) | 0x7C00 | _quiet(t) | ((u >> 13) & 0x3FF)
    return np.where(nan, nan_bits, rounded).astype(np.uint16)


def _first_nan(t: str, *vals):
    """The first NaN operand, quieted, in the compute type (None where no operand is NaN)."""
    ct = compute_type(t)
    q = UINT[np.dtype(ct).itemsize](1 << (np.finfo(ct).nmant - 1))
    out = np.full(np.shape(vals[0]), np.nan, dtype=ct)
    found = np.zeros(np.shape(vals[0]), dtype=bool)
    for v in reversed(vals):
        v = np.asarray(v, dtype=ct)
        out = np.where(np.isnan(v), (v.view(q.dtype) | q).view(ct), out)
        found |= np.isnan(v)
    return out, found


def _with_nan_rule(t, fn, *vals):
    """fn(*vals), except that with NaN operands the result is the first of them, quieted."""
    with np.errstate(all="ignore"):
        r = fn(*vals)
    n, found = _first_nan(t, *vals)
    return np.where(found, n, r)


def _maxnum(x, y):  # y is NaN: x; else the larger; on a tie y (the machine's select)
    return np.where((x > y) | np.isnan(y), x, y)


def _minnum(x, y):
    return np.where((x < y) | np.isnan(y), x, y)


def _maximum(t, x, y):  # NaN: the first NaN, quieted; +0 beats -0
    ui = x.view(UINT[x.itemsize]), y.view(UINT[y.itemsize])
    tie = (ui[0] & ui[1]).view(x.dtype)
    r = np.where(x == y, tie, np.where(x > y, x, y))
    return _with_nan_rule(t, lambda a, b: r, x, y)


def _minimum(t, x, y):  # NaN: the first NaN, quieted; -0 beats +0
    ui = x.view(UINT[x.itemsize]), y.view(UINT[y.itemsize])
    tie = (ui[0] | ui[1]).view(x.dtype)
    r = np.where(x == y, tie, np.where(x < y, x, y))
    return _with_nan_rule(t, lambda a, b: r, x, y)


_FLOAT_BINARY = {
    "add": lambda t, x, y: _with_nan_rule(t, np.add, x, y),
    "sub": lambda t, x, y: _with_nan_rule(t, np.subtract, x, y),
    "mul": lambda t, x, y: _with_nan_rule(t, np.multiply, x, y),
    "divf": lambda t, x, y: _with_nan_rule(t, np.divide, x, y),
    "remf": lambda t, x, y: _with_nan_rule(t, np.fmod, x, y),
    "maxnumf": lambda t, x, y: _maxnum(x, y),
    "minnumf": lambda t, x, y: _minnum(x, y),
    "maximumf": _maximum,
    "minimumf": _minimum,
}
_FCMP = {
    "false": lambda x, y: np.zeros(x.shape, bool), "true": lambda x, y: np.ones(x.shape, bool),
    "oeq": lambda x, y: x == y, "ogt": lambda x, y: x > y, "oge": lambda x, y: x >= y,
    "olt": lambda x, y: x < y, "ole": lambda x, y: x <= y, "one": lambda x, y: (x < y) | (x > y),
    "ord": lambda x, y: ~np.isnan(x) & ~np.isnan(y), "uno": lambda x, y: np.isnan(x) | np.isnan(y),
    "ueq": lambda x, y: ~((x < y) | (x > y)), "ugt": lambda x, y: ~(x <= y), "uge": lambda x, y: ~(x < y),
    "ult": lambda x, y: ~(x >= y), "ule": lambda x, y: ~(x > y), "une": lambda x, y: ~(x == y),
}
_MATH1 = {
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint,
    "abs": np.abs, "neg": np.negative, "sqrt": np.sqrt,
    "signbit": lambda x: np.signbit(x).astype(x.dtype), "isnan": lambda x: np.isnan(x).astype(x.dtype),
    "isinf": lambda x: np.isinf(x).astype(x.dtype), "isfinite": lambda x: np.isfinite(x).astype(x.dtype),
}


def _round_exact(t: str, r: Fraction, sign_if_zero: bool) -> int:
    """Storage bits of the exact value r rounded once to nearest even in float dtype t."""
    fmt = isa.DTYPE_BY_NAME[t].fmt
    nbits = 1 + fmt.ebits + fmt.mbits
    sign = (1 << (nbits - 1)) if (r < 0 or (r == 0 and sign_if_zero)) else 0
    a = abs(r)
    if a == 0:
        return sign
    emin = 1 - fmt.bias
    e = a.numerator.bit_length() - a.denominator.bit_length()  # 2^e <= a < 2^(e+2)
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, emin)
    scaled = a / Fraction(2) ** (e - fmt.mbits)  # a in units of the last place
    m = int(scaled)
    rem = scaled - m
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and m & 1):
        m += 1
    if m >> (fmt.mbits + 1):
        m >>= 1
        e += 1
    if e + fmt.bias >= (1 << fmt.ebits) - 1:  # overflow (these are the ieee formats): infinity
        return sign | (((1 << fmt.ebits) - 1) << fmt.mbits)
    if m < (1 << fmt.mbits):
        return sign | m  # subnormal
    return sign | ((e + fmt.bias) << fmt.mbits) | (m - (1 << fmt.mbits))


def _fma(t: str, x, y, z) -> np.ndarray:
    """x * y + z rounded once to dtype t (bits); NaN and infinite results as the machine gives them."""
    out = np.zeros(x.shape, dtype=storage(t))
    for i, (a, b, c) in enumerate(zip(x.tolist(), y.tolist(), z.tolist())):
        if np.isfinite(a) and np.isfinite(b) and np.isinf(c):
            out[i] = encode(t, np.array([c], dtype=x.dtype))[0]  # exactly: a finite product never cancels it
            continue
        if not all(np.isfinite(v) for v in (a, b, c)):
            with np.errstate(all="ignore"):
                r = _with_nan_rule(t, lambda p, q, s: p * q + s, *(np.array([v], dtype=x.dtype) for v in (a, b, c)))
            out[i] = encode(t, r)[0]
            continue
        exact = Fraction(a) * Fraction(b) + Fraction(c)
        # an exact zero is -0 only when the product and the addend are both -0 (or both negative zero)
        prod_neg = (np.signbit(a) != np.signbit(b))
        zero_neg = prod_neg and np.signbit(c) if (a * b == 0 and c == 0) else False
        out[i] = _round_exact(t, exact, bool(zero_neg))
    return out


def _select_float(t, op, vals, flags):
    x = vals[0]
    if op == "clamp":
        lo, hi = vals[1], vals[2]
        r = np.where(x > lo, np.where(x < hi, x, hi), np.where(lo < hi, lo, hi))
        return np.where(np.isnan(x), x, r) if flags.get("propagate_nan") else r
    raise KeyError(op)


def _binchain(t, ops: str, x, y, z):
    op1, op2 = ops.split("_")
    first = encode(t, _FLOAT_BINARY[op1](t, x, y))  # each step rounded: the two instructions' bits
    return _FLOAT_BINARY[op2](t, decode(t, first), z)


# ---------------------------------------------------------------------------------------------
# the entry points
# ---------------------------------------------------------------------------------------------
def elementwise(op: str, t: str, inputs, flags: dict | None = None, t2: str = "i1") -> np.ndarray:
    """The result bits of elementwise opcode `op` of dtype t over equally long storage arrays
    (select's condition and cmp results are i1 bytes)."""
    flags = dict(flags or {})
    kind = isa.DTYPE_BY_NAME[t].kind
    w = _bits_of(t)
    if op == "select":
        cond, a, b = inputs
        return np.where(np.asarray(cond) & 1, a, b).astype(storage(t))
    if op in ("cmpi", "cmpf") or kind == "int":
        return _int_or_cmp(op, t, w, inputs, flags)
    vals = [decode(t, x) for x in inputs]
    if op in _FLOAT_BINARY:
        return encode(t, _FLOAT_BINARY[op](t, *vals))
    if op == "fma":
        return _fma(t, *vals)
    if op == "clamp":
        return encode(t, _select_float(t, op, vals, flags))
    if op == "binchain":
        return encode(t, _binchain(t, flags["ops"], *vals))
    if op == "math1" and flags["fn"] in _MATH1:
        with np.errstate(invalid="ignore"):
            return encode(t, _MATH1[flags["fn"]](vals[0]))
    raise NotImplementedError(f"no reference for {op} of {t} with {flags}")


def _int_or_cmp(op, t, w, inputs, flags):
    if op == "cmpf":
        x, y = (decode(t, v) for v in inputs)
        return _FCMP[flags["pred"]](x, y).astype(np.uint8)
    if op == "cmpi":
        fn = _ICMP[flags["pred"]]
        return np.array([fn(a, b, w) for a, b in zip(*(v.tolist() for v in inputs))], dtype=np.uint8)
    lists = [np.asarray(v).tolist() for v in inputs]
    if op in _INT_BINARY:
        r = [int_binary(op, t, a, b) for a, b in zip(*lists)]
    elif op in _INT_UNARY:
        r = [_u(_INT_UNARY[op](a, w), w) for a in lists[0]]
    else:
        raise NotImplementedError(f"no reference for {op} of {t}")
    return np.array(r, dtype=storage(t))


def int_binary(op: str, t: str, a: int, b: int) -> int:
    """The result bits of binary integer opcode `op` of dtype t on one element: a and b are storage
    bits (unsigned ints). The compiler's constant folding computes through this."""
    if op not in _INT_BINARY:
        raise NotImplementedError(f"no reference for {op} of {t}")
    w = _bits_of(t)
    return _u(_INT_BINARY[op](a, b, w), w)


# red: the combine and identity of each reduction; float sums and products end in the default NaN
_DNAN = {np.float32: 0xFFC00000, np.float64: 0xFFF8000000000000}
_INT_RED = {"add": "add", "mul": "mul", "maxs": "maxs", "mins": "mins", "maxu": "maxu", "minu": "minu",
            "and": "and", "or": "or", "xor": "xor"}


# ---------------------------------------------------------------------------------------------
# Making and moving tiles
# ---------------------------------------------------------------------------------------------
def const(t: str, bits: int, n: int) -> np.ndarray:
    """`const`: n copies of the pool entry's bits, truncated to dtype t's storage."""
    return np.full(n, bits & ((1 << 8 * isa.DTYPE_BY_NAME[t].nbytes) - 1), dtype=storage(t))


def iota(t: str, start: int, n: int) -> np.ndarray:
    """`iota`: start + i in integer dtype t, wrapping at its width (i1: the low bit)."""
    if isa.DTYPE_BY_NAME[t].kind != "int":
        raise ValueError(f"iota needs an integer dtype, not {t}")
    w = _bits_of(t)
    return np.array([_u(start + i, w) for i in range(n)], dtype=storage(t))


def copy(t: str, src, n: int, broadcast: bool = False) -> np.ndarray:
    """`copy`: the first n elements of src, or its first element n times (bc1)."""
    src = np.asarray(src, dtype=storage(t))
    return np.full(n, src[0], dtype=storage(t)) if broadcast else src[:n].copy()


def red(op: str, t: str, src, outer: int, length: int, inner: int) -> np.ndarray:
    """The bits of `red` op over src (storage bits) viewed as [outer, length, inner], in the machine's
    order: a contiguous row (inner == 1) of 2 * RED_LANES or more in RED_LANES interleaved partial
    results combined as a tree, then the tail; otherwise in index order."""
    src = np.asarray(src).reshape(outer, length, inner)
    dt = isa.DTYPE_BY_NAME[t]
    if dt.kind == "int":
        w = _bits_of(t)
        fn = _INT_BINARY[_INT_RED[op]]
        combine = lambda a, b: _u(fn(a, b, w), w)
        rows = [[src[o, :, i].tolist() for i in range(inner)] for o in range(outer)]
        ident = {"add": 0, "mul": 1, "maxs": 1 << (w - 1), "mins": (1 << (w - 1)) - 1, "maxu": 0,
                 "minu": (1 << w) - 1, "and": (1 << w) - 1, "or": 0, "xor": 0}[op]
        out = [_fold(combine, r, _u(ident, w), inner == 1) for row in rows for r in row]
        return np.array(out, dtype=storage(t))
    ct = compute_type(t)
    combine = {"add": lambda a, b: ct(a + b), "mul": lambda a, b: ct(a * b),
               "maxnum": lambda a, b: _maxnum(a, b)[()], "minnum": lambda a, b: _minnum(a, b)[()],
               "maximum": lambda a, b: _maximum(t, np.asarray(a), np.asarray(b))[()],
               "minimum": lambda a, b: _minimum(t, np.asarray(a), np.asarray(b))[()]}[op]
    ident = {"add": 0.0, "mul": 1.0, "maxnum": -np.inf, "minnum": np.inf, "maximum": -np.inf,
             "minimum": np.inf}[op]
    out = []
    with np.errstate(all="ignore"):
        for o in range(outer):
            for i in range(inner):
                r = ct(_fold(combine, list(decode(t, src[o, :, i])), ct(ident), inner == 1))
                if op in ("add", "mul", "maximum", "minimum") and np.isnan(r):
                    r = np.array(_DNAN[ct], dtype=UINT[np.dtype(ct).itemsize]).view(ct)[()]
                out.append(r)
    return encode(t, np.array(out, dtype=ct))


def _fold(combine, xs: list, ident, contiguous: bool):
    if not xs:
        return ident
    lanes = isa.RED_LANES
    if contiguous and len(xs) >= 2 * lanes:
        lane = xs[:lanes]
        k = lanes
        while k + lanes <= len(xs):
            lane = [combine(lane[j], xs[k + j]) for j in range(lanes)]
            k += lanes
        width = lanes // 2
        while width >= 1:
            lane = [combine(lane[j], lane[j + width]) for j in range(width)] + lane[width:]
            width //= 2
        r = lane[0]
        for x in xs[k:]:
            r = combine(r, x)
        return r
    r = xs[0]
    for x in xs[1:]:
        r = combine(r, x)
    return r
