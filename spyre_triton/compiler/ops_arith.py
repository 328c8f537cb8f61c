"""Op handlers for elementwise arithmetic: the arith and math dialects and Triton's elementwise ops
(tt.clampf, tt.fp_to_fp, tt.bitcast, tt.precise_divf/sqrt, tt.mulhiui), with the affine index arithmetic
that keeps integer adds and multiplies of indices as descriptors' strides (affine_arith), and the
integer and power ops with no one-instruction lowering (floordivsi, ceildivsi, mulsi_extended, fpowi,
ipowi). One small function per TTIR op (or family), in this module's `HANDLERS` (registry.py).

Each handler takes the Lowering `L` and the op, emits instructions, and returns the lowered value(s)
of the op's results.
"""
from __future__ import annotations

from . import dtypes
from . import masks, registry, splits
from .values import Affine, Bounds, Const, Facts, Scalar, Tile, is_scalar, shape_of, splat_const

HANDLERS, handles = registry.table()


def rtype(op, i=0):
    return op.results[i].type


def rdtype(op, i=0):
    return dtypes.storage(rtype(op, i))


def odtype(op, i=0):
    return dtypes.storage(op.operands[i].type)


# -- shapes ---------------------------------------------------------------------------------
# (tt.broadcast, tt.expand_dims, tt.reshape and tt.trans of any rank are in ops_tensor.py)
def _dense_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))



# -- constants, program ids, ranges, splats -----------------------------------------------------
@handles("arith.constant")
def lower_constant(L, op):
    ty, value = rtype(op), op.attrs["value"]
    dtype = dtypes.storage(ty)
    if ty.kind != "tensor":
        return Const(_py(value, dtype), dtype)
    if getattr(value, "splat", None) is not None or not hasattr(value, "values"):
        v = value.splat if hasattr(value, "splat") and value.splat is not None else value
        return Affine(Const(_py(v, dtype), dtype), (None,) * len(ty.shape), tuple(ty.shape), dtype)
    out = L.new_tile(ty.shape, dtype)
    esize = dtypes.nbytes(dtype)
    for i, v in enumerate(value.values):
        L.emit("const", dtype, a=out.view((1,), off=i * esize), b=L.const_index(Const(_py(v, dtype), dtype)), n=1)
    return out


def _py(v, dtype):
    if isinstance(v, bool):
        return int(v)
    return float(v) if dtypes.is_float(dtype) else int(v)


@handles("ub.poison")
def lower_poison(L, op):
    ty = rtype(op)
    dtype = dtypes.storage(ty)
    zero = Const(0.0 if dtypes.is_float(dtype) else 0, dtype)
    return Affine(zero, (None,) * len(ty.shape), tuple(ty.shape), dtype) if ty.kind == "tensor" else zero


# -- arithmetic -----------------------------------------------------------------------------
BINARY = {
    "arith.addi": "add", "arith.addf": "add", "arith.subi": "sub", "arith.subf": "sub",
    "arith.muli": "mul", "arith.mulf": "mul", "arith.divf": "divf", "tt.precise_divf": "divf",
    "arith.remf": "remf", "arith.divsi": "divs", "arith.divui": "divu", "arith.remsi": "rems",
    "arith.remui": "remu", "arith.andi": "and", "arith.ori": "or", "arith.xori": "xor",
    "arith.shli": "shl", "arith.shrsi": "shrs", "arith.shrui": "shru", "arith.maxsi": "maxs",
    "arith.minsi": "mins", "arith.maxui": "maxu", "arith.minui": "minu", "arith.maxnumf": "maxnumf",
    "arith.minnumf": "minnumf", "arith.maximumf": "maximumf", "arith.minimumf": "minimumf",
    "tt.mulhiui": "mulhiu", "arith.mulsi_extended": None,
}


@handles(*[k for k, v in BINARY.items() if v])
def lower_binary(L, op):
    a, b = L.val(op.operands[0]), L.val(op.operands[1])
    dtype = rdtype(op)
    opcode = BINARY[op.name]
    if opcode == "and" and isinstance(a, Bounds) and isinstance(b, Bounds):
        return masks.both(L, a, b)
    if opcode in ("add", "sub", "mul") and not dtypes.is_float(dtype):
        r = affine_arith(L, opcode, a, b, dtype)
        if r is not None:
            return r
    if opcode in ("divs", "rems") and dtype != "i1":
        r = div_affine(L, opcode, a, b, dtype)
        if r is not None:
            return r
    out = L.elementwise(opcode, dtype, [a, b])
    return splits.with_facts(out, splits.binop(opcode, a, b)) if is_scalar(a) and is_scalar(b) else out


def div_affine(L, opcode, a, b, dtype):
    """a // b or a % b (signed) kept affine, else None: a splat by a scalar is the splat of one scalar
    division, and an affine index by a constant splits dimension by dimension (splits.py)."""
    if isinstance(b, Affine) and b.is_splat:
        b = b.base
    if isinstance(a, Affine) and a.is_splat and is_scalar(b):
        q = L.elementwise(opcode, dtype, [a.base, b])
        return Affine(splits.with_facts(q, splits.binop(opcode, a.base, b)), a.coefs, a.shape, dtype)
    D = splits.const_divisor(b)
    if isinstance(a, Affine) and D is not None:
        return splits.divide(L, opcode, a, D)
    return None


def _as_affine(v, shape, vectors=False):
    if isinstance(v, Affine):
        return v
    if is_scalar(v):
        return Affine(v, (None,) * len(shape), shape, v.dtype)
    if vectors:
        return vector_affine(v)
    return None


def vector_affine(v):
    """An integer tile that varies along one dimension only (the others of size 1), as an Affine whose
    coefficient there is the tile's 1-D view: an offset vector (values.py). Else None."""
    if not isinstance(v, Tile) or dtypes.is_float(v.dtype) or v.dtype == "i1" or not v.shape:
        return None
    varying = [d for d, n in enumerate(v.shape) if n != 1]
    if len(varying) != 1:
        return None
    d = varying[0]
    coefs = tuple(v.view((v.shape[d],)) if k == d else None for k in range(len(v.shape)))
    return Affine(Const(0, v.dtype), coefs, v.shape, v.dtype)


def affine_arith(L, opcode, a, b, dtype):
    """a op b kept affine when it can be (integer add/sub, and mul by a splat), else None. A tile that
    varies along one dimension joins an affine value as an offset vector (row offsets plus a strided
    column: one DMA with a row table instead of a gather per element)."""
    if is_scalar(a) and is_scalar(b):
        return L.s_binop(opcode, a, b, dtype)
    shape = shape_of(a) or shape_of(b)
    vectors = any(isinstance(x, Affine) and not x.is_splat for x in (a, b))
    A, B = _as_affine(a, shape, vectors), _as_affine(b, shape, vectors)
    if A is None or B is None:
        return None
    if opcode in ("add", "sub"):
        if opcode == "sub":
            B = scale_affine(L, B, Const(-1, dtype))
        base = L.s_binop("add", A.base, B.base, dtype)
        coefs = tuple(_add_coef(L, x, y, dtype) for x, y in zip(A.coefs, B.coefs))
        return Affine(base, coefs, shape, dtype)
    if A.is_splat:
        A, B = B, A
    if not B.is_splat:
        return None
    return scale_affine(L, A, B.base)


def _add_coef(L, x, y, dtype):
    if x is None:
        return y
    if y is None:
        return x
    if isinstance(x, Tile) or isinstance(y, Tile):  # offset vectors: add as vectors (a stride is c * idx)
        n = (x if isinstance(x, Tile) else y).shape[0]
        xs, ys = coef_vector(L, x, dtype, n), coef_vector(L, y, dtype, n)
        out = splits.with_facts(L.elementwise("add", dtype, [xs, ys]), splits.binop("add", xs, ys))
        return splits.with_pattern(out, splits.sum_pattern(x, y))
    return L.s_binop("add", x, y, dtype)


def coef_vector(L, c, dtype, n):
    """A coefficient of a dimension of extent n as an offset vector: a Tile as is, a stride c as c * idx."""
    if isinstance(c, Tile):
        return c
    return splits.with_facts(L.materialized(Affine(Const(0, dtype), (c,), (n,), dtype)),
                             splits.mul(splits.facts_of(c), Facts(0, n - 1, 1)))


def scale_affine(L, a: Affine, s) -> Affine:
    return Affine(L.s_binop("mul", a.base, s, a.dtype),
                  tuple(None if c is None else scale_coef(L, c, s, a.dtype) for c in a.coefs), a.shape, a.dtype)


def scale_coef(L, c, s, dtype):
    if not isinstance(c, Tile):
        return L.s_binop("mul", c, s, dtype)
    if isinstance(s, Const) and s.value == 1:
        return c
    out = splits.with_facts(L.elementwise("mul", dtype, [c, s]), splits.binop("mul", c, s))
    return splits.with_pattern(out, splits.scaled_pattern(c, s))


def cast_coef(L, c, dtype):
    """A coefficient sign-extended or truncated to dtype (an offset vector with cvt)."""
    if not isinstance(c, Tile):
        return L.s_cast(c, dtype)
    if c.dtype == dtype:
        return c
    out = splits.with_facts(L.elementwise("cvt", dtype, [c], flags={"mode": "sext"}, t2=c.dtype),
                            splits.cast(splits.facts_of(c), c.dtype, dtype))
    return splits.with_pattern(out, c.pattern if splits.survives_cast(splits.facts_of(c), c.dtype, dtype) else None)


@handles("arith.cmpi", "arith.cmpf")
def lower_cmp(L, op):
    a, b = L.val(op.operands[0]), L.val(op.operands[1])
    if op.name == "arith.cmpi":
        bounds = masks.from_cmp(L, op.attrs["predicate"], a, b, odtype(op))
        if bounds is not None:
            return bounds
        same = boolean_compare(L, op)
        if same is not None:
            return same
    opcode = "cmpi" if op.name == "arith.cmpi" else "cmpf"
    return L.elementwise(opcode, odtype(op), [a, b], out_dtype="i1", flags={"pred": op.attrs["predicate"]})


FCMP_NOT = {"oeq": "une", "ogt": "ule", "oge": "ult", "olt": "uge", "ole": "ugt", "one": "ueq", "ord": "uno",
            "false": "true"}
FCMP_NOT.update({v: k for k, v in FCMP_NOT.items()})
ICMP_NOT = {"eq": "ne", "slt": "sge", "sle": "sgt", "ult": "uge", "ule": "ugt"}
ICMP_NOT.update({v: k for k, v in ICMP_NOT.items()})


def boolean_compare(L, op):
    """`b != 0` and `b == 0` of a boolean b, or of b zero- or sign-extended (Inductor's
    `((x == y) == 0).to(tl.int64) != 0`), and `b == 1`, `b != 1` of b or b zero-extended: b itself or its
    negation, not a compare per element (the negation of a compare is the inverse compare). Else None."""
    pred = op.attrs["predicate"]
    if pred not in ("eq", "ne"):
        return None
    x_val, c = op.operands[0], splat_const(L.val(op.operands[1]))
    if c is None:
        x_val, c = op.operands[1], splat_const(L.val(op.operands[0]))
    if c is None or c.value not in (0, 1):
        return None
    owner = getattr(x_val, "owner", None)
    if getattr(owner, "name", None) in ("arith.extui", "arith.extsi") and odtype(owner) == "i1":
        if owner.name == "arith.extsi" and c.value != 0:  # sign-extended true is -1
            return None
        x_val = owner.operands[0]
    if dtypes.storage(x_val.type) != "i1" or not isinstance(L.val(x_val), (Tile, Bounds)):
        return None
    if (pred == "ne") == (c.value == 0):
        return L.val(x_val)
    return negation(L, x_val)


def negation(L, x_val):
    """not x for an i1 tensor x: the inverse compare when x is a float or a plain integer compare."""
    owner = getattr(x_val, "owner", None)
    name = getattr(owner, "name", None)
    x = L.val(x_val)
    if name in ("arith.cmpf", "arith.cmpi") and isinstance(x, Tile):
        inverse = (FCMP_NOT if name == "arith.cmpf" else ICMP_NOT).get(owner.attrs["predicate"])
        if inverse is not None:
            a, b = L.val(owner.operands[0]), L.val(owner.operands[1])
            return L.elementwise("cmpf" if name == "arith.cmpf" else "cmpi", odtype(owner), [a, b], out_dtype="i1",
                                 flags={"pred": inverse})
    return L.elementwise("xor", "i1", [x, Const(1, "i1")])


@handles("arith.select")
def lower_select(L, op):
    c, a, b = (L.val(v) for v in op.operands)
    if isinstance(c, Bounds) and c.shape and masks.selectable(c):
        return masks.select(L, c, a, b, rdtype(op), x_value=op.operands[1])
    return L.elementwise("select", rdtype(op), [c, a, b])


@handles("math.fma")
def lower_fma(L, op):
    return L.elementwise("fma", rdtype(op), [L.val(v) for v in op.operands])


@handles("tt.clampf")
def lower_clamp(L, op):
    prop = op.attrs.get("propagateNan", "none")
    flag = 1 if str(prop).lower() in ("all", "1", "true") else 0
    return L.elementwise("clamp", rdtype(op), [L.val(v) for v in op.operands], flags={"propagate_nan": flag})


MATH1 = {
    "math.exp": "exp", "math.exp2": "exp2", "math.log": "log", "math.log2": "log2", "math.log10": "log10",
    "math.log1p": "log1p", "math.expm1": "expm1", "math.sqrt": "sqrt", "tt.precise_sqrt": "sqrt",
    "math.rsqrt": "rsqrt", "math.cbrt": "cbrt", "math.sin": "sin", "math.cos": "cos", "math.tan": "tan",
    "math.asin": "asin", "math.acos": "acos", "math.atan": "atan", "math.sinh": "sinh", "math.cosh": "cosh",
    "math.tanh": "tanh", "math.asinh": "asinh", "math.acosh": "acosh", "math.atanh": "atanh", "math.erf": "erf",
    "math.erfc": "erfc", "math.floor": "floor", "math.ceil": "ceil", "math.trunc": "trunc",
    "math.round": "round", "math.roundeven": "rint", "math.absf": "abs", "arith.negf": "neg",
}
MATH2 = {"math.powf": "pow", "math.atan2": "atan2", "math.copysign": "copysign"}


@handles(*MATH1)
def lower_math1(L, op):
    return L.elementwise("math1", rdtype(op), [L.val(op.operands[0])], flags={"fn": MATH1[op.name]})


@handles(*MATH2)
def lower_math2(L, op):
    return L.elementwise("math2", rdtype(op), [L.val(v) for v in op.operands], flags={"fn": MATH2[op.name]})


@handles("math.absi")
def lower_absi(L, op):
    return L.elementwise("absi", rdtype(op), [L.val(op.operands[0])])


@handles("math.ctpop", "math.ctlz", "math.cttz")
def lower_bitcount(L, op):
    return L.elementwise(op.name.split(".")[1], rdtype(op), [L.val(op.operands[0])])


# -- casts ----------------------------------------------------------------------------------
CASTS = {
    "arith.extsi": "sext", "arith.extui": "zext", "arith.trunci": "sext", "arith.sitofp": "sitofp",
    "arith.uitofp": "uitofp", "arith.fptosi": "fptosi", "arith.fptoui": "fptoui", "arith.extf": "fpext",
    "arith.truncf": "rtne", "arith.index_cast": "sext", "arith.index_castui": "zext",
}


@handles(*CASTS)
def lower_cast(L, op):
    src, dst_t, src_t = L.val(op.operands[0]), rdtype(op), odtype(op)
    mode = CASTS[op.name]
    if mode in ("sext", "zext") and isinstance(src, (Affine, Const)) and not (isinstance(src, Affine) and src.is_splat and not is_scalar(src.base)):
        # term by term: a truncation always (it wraps as the sum does), a sign extension of a sum that
        # cannot wrap (of one that may, the elements are extended)
        widens = dtypes.nbytes(dst_t) > dtypes.nbytes(src_t)
        if isinstance(src, Affine) and widens and splits.may_wrap(src):
            return cvt(L, src, src_t, dst_t, mode)
        if mode == "sext" or (isinstance(src, Const) and src.value >= 0):
            if isinstance(src, Const):
                return Const(dtypes.wrap(src.value, dst_t), dst_t)
            if mode == "zext" and any(isinstance(c, Tile) for c in src.coefs):
                return cvt(L, src, src_t, dst_t, mode)
            return Affine(L.s_cast(src.base, dst_t), tuple(None if c is None else cast_coef(L, c, dst_t) for c in src.coefs),
                          src.shape, dst_t)
    return cvt(L, src, src_t, dst_t, mode)


def cvt(L, src, src_t, dst_t, mode):
    if isinstance(src, Const) and mode in ("sext", "zext") and src_t != "i1":
        return Const(dtypes.wrap(src.value, dst_t), dst_t)
    out = L.elementwise("cvt", dst_t, [src], flags={"mode": mode}, t2=src_t)
    f = splits.facts_of(src)  # an index widened (or narrowed without loss) keeps what is known of it
    if isinstance(src, Scalar) and src_t != "i1" and (mode == "sext" or (mode == "zext" and splits.nonneg(f))):
        return splits.with_facts(out, splits.cast(f, src_t, dst_t))
    return out


@handles("tt.fp_to_fp")
def lower_fp_to_fp(L, op):
    src_t, dst_t = odtype(op), rdtype(op)
    wider = dtypes.nbytes(dst_t) > dtypes.nbytes(src_t)
    mode = "fpext" if wider else op.attrs.get("rounding", "rtne")
    x = L.val(op.operands[0])
    if dst_t == "f8e5m2" and not src_t.startswith("f8") and mode == "rtne":
        # Triton's rtne fp8 downcasts saturate (cvt.rn.satfinite): +-inf and overflow give +-57344, NaN stays
        # NaN. Its rtz path truncates an f16 (rtz) instead: overflow gives 57344 but inf stays inf, as cvt
        # does. cvt keeps e5m2's infinities (fp8 arithmetic rounds back through it), so clamp first.
        x = L.elementwise("clamp", src_t, [x, Const(-57344.0, src_t), Const(57344.0, src_t)],
                          flags={"propagate_nan": 1})
    return cvt(L, x, src_t, dst_t, mode)


@handles("tt.bitcast", "arith.bitcast", "tt.int_to_ptr", "tt.ptr_to_int")
def lower_bitcast(L, op):
    v, dst_t = L.val(op.operands[0]), rdtype(op)
    if isinstance(v, Tile):
        return v.view(dtype=dst_t)
    if isinstance(v, Scalar):
        return Scalar(v.slot, dst_t)
    if isinstance(v, Affine) and not dtypes.is_float(dst_t) and not dtypes.is_float(v.dtype):
        if v.dtype != dst_t and dtypes.nbytes(v.dtype) != dtypes.nbytes(dst_t):
            return v
        return Affine(v.base, tuple(c.view(dtype=dst_t) if isinstance(c, Tile) else c for c in v.coefs), v.shape, dst_t)
    if isinstance(v, Const) and not dtypes.is_float(dst_t) and not dtypes.is_float(v.dtype):
        return Const(v.value, dst_t)
    s = L.scalar(v) if is_scalar(v) or (isinstance(v, Affine) and v.is_splat) else L.tile(v)
    if isinstance(v, Affine) and v.is_splat:
        return Affine(Scalar(s.slot, dst_t), v.coefs, v.shape, dst_t)
    return lower_bitcast_value(s, dst_t)


def lower_bitcast_value(s, dst_t):
    return Scalar(s.slot, dst_t) if isinstance(s, Scalar) else s.view(dtype=dst_t)


def _not(L, m):
    return L.elementwise("xor", "i1", [m, Const(1, "i1")])


def _and(L, a, b):
    if a is None:
        return b
    if b is None:
        return a
    return L.elementwise("and", "i1", [a, b])


# -- integer and power arithmetic -------------------------------------------------------------
def _bool_to(L, b, dtype):
    return L.elementwise("cvt", dtype, [b], flags={"mode": "zext"}, t2="i1")


@handles("arith.floordivsi", "arith.ceildivsi", "arith.ceildivui")
def lower_rounding_div(L, op):
    a, b = L.val(op.operands[0]), L.val(op.operands[1])
    t = rdtype(op)
    unsigned = op.name == "arith.ceildivui"
    if isinstance(a, Const) and isinstance(b, Const) and b.value != 0:
        x, y = a.value, b.value
        if unsigned:
            bits = dtypes.nbytes(t) * 8
            x, y = x & ((1 << bits) - 1), y & ((1 << bits) - 1)
            return Const(dtypes.wrap(-(-x // y), t), t)
        return Const(dtypes.wrap(x // y if op.name == "arith.floordivsi" else -(-x // y), t), t)
    q = L.elementwise("divu" if unsigned else "divs", t, [a, b])
    r = L.elementwise("remu" if unsigned else "rems", t, [a, b])
    inexact = L.elementwise("cmpi", t, [r, Const(0, t)], out_dtype="i1", flags={"pred": "ne"})
    if unsigned:
        return L.elementwise("add", t, [q, _bool_to(L, inexact, t)])
    # the true quotient is negative exactly when r and b have opposite signs (r != 0)
    sx = L.elementwise("xor", t, [r, b])
    neg = L.elementwise("cmpi", t, [sx, Const(0, t)], out_dtype="i1", flags={"pred": "slt"})
    if op.name == "arith.floordivsi":
        return L.elementwise("sub", t, [q, _bool_to(L, _and(L, inexact, neg), t)])
    return L.elementwise("add", t, [q, _bool_to(L, _and(L, inexact, _not(L, neg)), t)])


@handles("arith.mulsi_extended", "arith.mului_extended")
def lower_mul_extended(L, op):
    a, b = L.val(op.operands[0]), L.val(op.operands[1])
    t = rdtype(op)
    lo = L.elementwise("mul", t, [a, b])
    hi = L.elementwise("mulhis" if op.name == "arith.mulsi_extended" else "mulhiu", t, [a, b])
    return [lo, hi]


@handles("math.fpowi")
def lower_fpowi(L, op):
    x, e = L.val(op.operands[0]), L.val(op.operands[1])
    t = rdtype(op)
    et = dtypes.storage(op.operands[1].type)
    ef = L.elementwise("cvt", t, [e], flags={"mode": "sitofp"}, t2=et)
    return L.elementwise("math2", t, [x, ef], flags={"fn": "pow"})


@handles("math.ipowi")
def lower_ipowi(L, op):
    """a ** b by square-and-multiply over b's bits; for b < 0: 1 if a == 1, +-1 if a == -1, else 0."""
    a, b = L.val(op.operands[0]), L.val(op.operands[1])
    t = rdtype(op)
    bits = 1 if t == "i1" else dtypes.nbytes(t) * 8
    result = Const(1, t)
    base = a
    for k in range(bits - 1):
        bit = L.elementwise("and", t, [L.elementwise("shru", t, [b, Const(k, t)]), Const(1, t)])
        on = L.elementwise("cmpi", t, [bit, Const(0, t)], out_dtype="i1", flags={"pred": "ne"})
        result = L.elementwise("select", t, [on, L.elementwise("mul", t, [result, base]), result])
        if k < bits - 2:
            base = L.elementwise("mul", t, [base, base])
    neg = L.elementwise("cmpi", t, [b, Const(0, t)], out_dtype="i1", flags={"pred": "slt"})
    odd = L.elementwise("cmpi", t, [L.elementwise("and", t, [b, Const(1, t)]), Const(0, t)], out_dtype="i1",
                        flags={"pred": "ne"})
    is_one = L.elementwise("cmpi", t, [a, Const(1, t)], out_dtype="i1", flags={"pred": "eq"})
    is_m1 = L.elementwise("cmpi", t, [a, Const(-1, t)], out_dtype="i1", flags={"pred": "eq"})
    m1 = L.elementwise("select", t, [odd, Const(-1, t), Const(1, t)])
    alt = L.elementwise("select", t, [is_one, Const(1, t), L.elementwise("select", t, [is_m1, m1, Const(0, t)])])
    return L.elementwise("select", t, [neg, alt, result])
