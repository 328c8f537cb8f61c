"""Op handlers for arith, math and tt's core ops (pointers, memory, dot, reductions, calls, printing):
one small function per TTIR op (or family), in this module's `HANDLERS` (registry.py).

Each handler takes the Lowering `L` and the op, emits instructions, and returns the lowered value(s)
of the op's results.
"""
from __future__ import annotations

from math import prod

from .. import isa
from . import dtypes
from . import masks, registry, splits
from .mir import Label
from .values import Affine, Bounds, Const, Facts, Scalar, Tile, is_scalar, shape_of, splat_const

HANDLERS, handles = registry.table()


def rtype(op, i=0):
    return op.results[i].type


def rdtype(op, i=0):
    return dtypes.storage(rtype(op, i))


def odtype(op, i=0):
    return dtypes.storage(op.operands[i].type)


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


@handles("tt.get_program_id", "tt.get_num_programs")
def lower_program_id(L, op):
    out = L.new_scalar("i32")
    L.emit("pid" if op.name == "tt.get_program_id" else "nprog", "i32", a=out, b=op.attrs.get("axis", 0))
    return splits.with_facts(out, Facts(0 if op.name == "tt.get_program_id" else 1))


@handles("tt.make_range")
def lower_make_range(L, op):
    start, end = op.attrs["start"], op.attrs["end"]
    return Affine(Const(start, "i32"), (Const(1, "i32"),), (end - start,), "i32")


@handles("tt.splat")
def lower_splat(L, op):
    ty = rtype(op)
    return Affine(L.val(op.operands[0]), (None,) * len(ty.shape), tuple(ty.shape), dtypes.storage(ty))


# -- shapes ---------------------------------------------------------------------------------
# (tt.broadcast, tt.expand_dims, tt.reshape and tt.trans of any rank are in ops_tensor.py)
def _dense_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


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


# -- pointers and memory ------------------------------------------------------------------------
@handles("tt.addptr")
def lower_addptr(L, op):
    p, off = L.val(op.operands[0]), L.val(op.operands[1])
    esize = dtypes.nbytes(dtypes.pointee(op.operands[0].type))
    off_t = odtype(op, 1)
    if is_scalar(p) and is_scalar(off):
        off64 = L.s_cast(off, "i64") if off_t != "i64" else off
        return L.s_binop("add", p, L.s_binop("mul", off64, Const(esize, "i64"), "i64"), "i64")
    shape = shape_of(p) or shape_of(off)
    # an offset tile that varies along one dimension (row indices, `offs % M`, `x // n`) becomes an
    # offset vector of the descriptor: one DMA of runs, not a gather per element
    P = _as_affine(p, shape)
    O = _as_affine(off, shape, vectors=isinstance(p, Affine) and not p.is_splat)
    if P is not None and O is not None and (off_t == "i64" or not splits.may_wrap(O, address=off_t == "i32")):
        O64 = Affine(L.s_cast(O.base, "i64"), tuple(None if c is None else cast_coef(L, c, "i64") for c in O.coefs),
                     shape, "i64")
        return affine_arith(L, "add", P, scale_affine(L, O64, Const(esize, "i64")), "i64")
    # irregular: a tile of addresses
    if O is not None and O.is_splat:  # the same offset for every element: one scalar, broadcast
        step = L.s_binop("mul", L.s_cast(O.base, "i64"), Const(esize, "i64"), "i64")
        return L.elementwise("add", "i64", [p, step])
    o = L.tile(O) if O is not None else L.tile(off)
    if off_t != "i64":
        o = L.elementwise("cvt", "i64", [o], flags={"mode": "sext"}, t2=off_t)
    scaled = L.elementwise("mul", "i64", [o, Const(esize, "i64")])
    return L.elementwise("add", "i64", [p, scaled])


def mask_operand(L, m):
    """(operand or None, broadcast) for a mask value; None means every element is active."""
    if m is None:
        return None, False
    c = splat_const(m)
    if c is not None:
        if c.value:
            return None, False
    return L.operand(m)


@handles("tt.load")
def lower_load(L, op):
    p = L.val(op.operands[0])
    mask = L.val(op.operands[1]) if len(op.operands) > 1 else None
    other = L.val(op.operands[2]) if len(op.operands) > 2 else None
    dtype = rdtype(op)
    if isinstance(p, Affine) and p.is_splat and mask is None:  # one address (an index split to a scalar):
        out = L.new_scalar(dtype)  # load it once, a splat of the scalar
        L.emit("gather", dtype, a=out, b=L.scalar(p.base), n=1, flags={"bc_addr": 1})
        return Affine(out, p.coefs, p.shape, dtype)
    if isinstance(p, Affine) and not p.is_splat and isinstance(mask, Bounds):
        # an index-bound mask: the descriptor's bounds, no mask tile
        out = L.new_tile(shape_of(p), dtype)
        o, bc_o = L.operand(other) if other is not None else (None, False)
        L.emit("ld", dtype, a=out, b=L.scalar(p.base), c=dma_desc(L, p, mask), e=o, flags={"bc_other": int(bc_o)})
        return out
    m, bc_m = mask_operand(L, mask)
    o, bc_o = L.operand(other) if other is not None else (None, False)
    if is_scalar(p):
        out = L.new_scalar(dtype)
        L.emit("gather", dtype, a=out, b=L.scalar(p), c=m, d=o, n=1,
               flags={"bc_addr": 1, "bc_mask": int(bc_m), "bc_other": int(bc_o)})
        return out
    out = L.new_tile(shape_of(p), dtype)
    if isinstance(p, Affine) and not p.is_splat:
        L.emit("ld", dtype, a=out, b=L.scalar(p.base), c=dma_desc(L, p), d=m, e=o,
               flags={"bc_mask": int(bc_m), "bc_other": int(bc_o)})
        return out
    addr, bc_a = L.operand(p)
    L.emit("gather", dtype, a=out, b=addr, c=m, d=o, n=out.numel,
           flags={"bc_addr": int(bc_a), "bc_mask": int(bc_m), "bc_other": int(bc_o)})
    return out


def dma_desc(L, p: Affine, bounds: Bounds | None = None) -> int:
    """The descriptor of an access through affine pointers p, bounded by an index-bound mask. A Tile
    coefficient is an offset vector (i64 bytes: p's coefficients are); one whose pattern is known, on an
    unbounded dimension, becomes two strided dimensions instead (`x % 64`, `x // 64`: [n / 64, 64])."""
    limits = masks.limit_slots(L, bounds) if bounds is not None else (None,) * len(p.shape)
    shape, strides, lims = [], [], []
    for d, (n, c, lim) in enumerate(zip(p.shape, p.coefs, limits)):
        pat = c.pattern if isinstance(c, Tile) else None
        split = len(shape) - d  # dimensions split so far
        if pat is not None and lim is None and n % pat[2] == 0 and len(p.shape) + split < isa.MAX_RANK:
            shape += [n // pat[2], pat[2]]
            strides += [pat[1], pat[0]]
            lims += [None, None]
            continue
        shape.append(n)
        strides.append(0 if c is None else (c.value if isinstance(c, Const) else c))
        lims.append(lim)
    return L.desc(tuple(shape), tuple(strides), tuple(lims) if bounds is not None else ())


@handles("tt.store")
def lower_store(L, op):
    p, v = L.val(op.operands[0]), L.val(op.operands[1])
    mask = L.val(op.operands[2]) if len(op.operands) > 2 else None
    dtype = odtype(op, 1)
    if isinstance(p, Affine) and not p.is_splat and isinstance(mask, Bounds):
        src, bc_s = L.operand(v)
        L.emit("st", dtype, a=L.scalar(p.base), b=dma_desc(L, p, mask), c=src, flags={"bc_src": int(bc_s)})
        return None
    m, bc_m = mask_operand(L, mask)
    src, bc_s = L.operand(v)
    if isinstance(p, Affine) and not p.is_splat:
        L.emit("st", dtype, a=L.scalar(p.base), b=dma_desc(L, p), c=src, d=m,
               flags={"bc_src": int(bc_s), "bc_mask": int(bc_m)})
        return None
    addr, bc_a = L.operand(p)
    n = prod(shape_of(p)) if shape_of(p) else 1
    L.emit("scatter", dtype, a=addr, b=src, c=m, n=n, flags={"bc_addr": int(bc_a), "bc_src": int(bc_s),
                                                              "bc_mask": int(bc_m)})
    return None


ATOMIC_OPS = {"add": "add", "fadd": "fadd", "max": "max", "min": "min", "umax": "umax", "umin": "umin",
              "and": "and", "or": "or", "xor": "xor", "exch": "xchg", "xchg": "xchg"}


@handles("tt.atomic_rmw")
def lower_atomic_rmw(L, op):
    p, v = L.val(op.operands[0]), L.val(op.operands[1])
    mask = L.val(op.operands[2]) if len(op.operands) > 2 else None
    dtype = rdtype(op)
    kind = ATOMIC_OPS.get(str(op.attrs.get("atomic_rmw_op")).lower())
    if kind is None:
        raise L.error(f"atomic op {op.attrs.get('atomic_rmw_op')!r} is not supported")
    addr, bc_a = L.operand(p)
    val, bc_v = L.operand(v)
    m, bc_m = mask_operand(L, mask)
    shape = shape_of(p)
    out = L.new_like(shape, dtype)
    L.emit("atom", dtype, a=out, b=addr, c=val, d=m, n=prod(shape) if shape else 1,
           flags={"bc_addr": int(bc_a and bool(shape)), "bc_val": int(bc_v and bool(shape)),
                  "bc_mask": int(bc_m and bool(shape)), "op": kind})
    return out


@handles("tt.atomic_cas")
def lower_atomic_cas(L, op):
    p, c, v = (L.val(x) for x in op.operands)
    dtype = rdtype(op)
    addr, bc_a = L.operand(p)
    cmp, bc_c = L.operand(c)
    val, bc_v = L.operand(v)
    shape = shape_of(p)
    out = L.new_like(shape, dtype)
    L.emit("acas", dtype, a=out, b=addr, c=cmp, d=val, n=prod(shape) if shape else 1,
           flags={"bc_addr": int(bc_a and bool(shape)), "bc_cmp": int(bc_c and bool(shape)),
                  "bc_val": int(bc_v and bool(shape))})
    return out


# -- reductions and dot -----------------------------------------------------------------------
COMBINE = {
    "arith.addf": "add", "arith.addi": "add", "arith.mulf": "mul", "arith.muli": "mul",
    "arith.maxnumf": "maxnum", "arith.minnumf": "minnum", "arith.maximumf": "maximum",
    "arith.minimumf": "minimum", "arith.maxsi": "maxs", "arith.minsi": "mins", "arith.maxui": "maxu",
    "arith.minui": "minu", "arith.andi": "and", "arith.ori": "or", "arith.xori": "xor",
}


def builtin_combine(region):
    """The `red` op for a combine region that is one commutative op of its two arguments, or a max/min
    written as a compare and a select, else None."""
    block = region.blocks[0]
    if len(block.args) != 2 or not block.ops or block.ops[-1].name != "tt.reduce.return":
        return None
    *body, ret = block.ops
    if not body or len(ret.operands) != 1 or ret.operands[0] is not body[-1].results[0]:
        return None
    if len(body) == 1 and body[0].name in COMBINE and set(map(id, body[0].operands)) == set(map(id, block.args)):
        return COMBINE[body[0].name]
    return select_minmax(body, *block.args)


# `where(a > b, a, b)` on integers, and on floats with `| (a != a)`: Inductor's triton_helpers.maximum and
# minimum, which every max/min reduction it generates (softmax's row max) combines with. Reduced
# pairwise they would cost a compare, an or and a select per halving; as one `red` they are one pass.
SELECT_MINMAX = {("arith.cmpi", "sgt"): "maxs", ("arith.cmpi", "slt"): "mins", ("arith.cmpi", "ugt"): "maxu",
                 ("arith.cmpi", "ult"): "minu", ("arith.cmpf", "ogt"): "maximum", ("arith.cmpf", "olt"): "minimum"}


def select_minmax(body, a, b):
    """The float form keeps a NaN from either side, as `maximum`/`minimum` do; it picks b on ties, so
    which zero a max of -0 and +0 gives depends on the order, as it does for the pairwise reduction."""
    if len(body) not in (2, 4) or body[0].operands != [a, b]:
        return None
    kind = SELECT_MINMAX.get((body[0].name, body[0].attrs.get("predicate")))
    is_float = body[0].name == "arith.cmpf"
    if kind is None or len(body) != (4 if is_float else 2):
        return None
    mask = body[0].results[0]
    if is_float:  # mask |= a != a
        nan, either = body[1], body[2]
        if (nan.name, nan.attrs.get("predicate"), nan.operands) != ("arith.cmpf", "une", [a, a]):
            return None
        if either.name != "arith.ori" or set(map(id, either.operands)) != {id(mask), id(nan.results[0])}:
            return None
        mask = either.results[0]
    sel = body[-1]
    return kind if sel.name == "arith.select" and sel.operands == [mask, a, b] else None


@handles("tt.reduce")
def lower_reduce(L, op):
    axis = op.attrs["axis"]
    srcs = [L.tile(L.val(v)) for v in op.operands]
    shape = srcs[0].shape
    outer, length, inner = prod(shape[:axis]), shape[axis], prod(shape[axis + 1:])
    out_shape = shape[:axis] + shape[axis + 1:]
    kind = builtin_combine(op.regions[0]) if len(srcs) == 1 else None
    if kind is not None:
        out = L.new_like(out_shape, srcs[0].dtype)
        L.emit("red", srcs[0].dtype, a=out, b=srcs[0], c=outer, d=length, e=inner, flags={"op": kind})
        return out
    return tree_reduce(L, op, srcs, outer, length, inner, out_shape)


def tree_reduce(L, op, srcs, outer, length, inner, out_shape):
    """A user combine function applied pairwise: halve the reduced axis until one row is left."""
    rest = outer * inner
    work = []
    for s in srcs:
        w = L.new_tile((length, rest), s.dtype)
        L.emit("tcopy", s.dtype, a=w, b=s, c=L.desc((length, outer, inner), (inner, length * inner, 1)))
        work.append(w)
    h = length
    while h > 1:
        h //= 2
        lhs = [w.view((h * rest,)) for w in work]
        rhs = [w.view((h * rest,), off=h * rest * dtypes.nbytes(w.dtype)) for w in work]
        results = L.inline_region(op.regions[0], lhs + rhs)
        for w, r in zip(lhs, results):
            L.store_into(w, r)
    outs = []
    for w in work:
        if out_shape:
            outs.append(w.view(out_shape))
        else:
            outs.append(L.scalar(w.view((1,))))
    return outs


@handles("tt.dot")
def lower_dot(L, op):
    a, b = L.tile(L.val(op.operands[0])), L.tile(L.val(op.operands[1]))
    c = L.val(op.operands[2])
    out_t, in_t = rdtype(op), odtype(op, 0)
    if odtype(op, 1) != in_t:  # two different fp8 types (Triton allows any pair): both exactly to f16
        a, b = (L.elementwise("cvt", "f16", [x], flags={"mode": "fpext"}, t2=x.dtype) for x in (a, b))
        in_t = "f16"
    shape = tuple(rtype(op).shape)
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if M >= 1 << 16 or N >= 1 << 16:
        raise L.error(f"dot of {M}x{N} exceeds the PE array's 65535 limit per side")
    batch = a.shape[0] if len(a.shape) == 3 else 0
    acc = None
    zero = splat_const(c)
    if not (zero is not None and zero.value == 0):
        acc = L.tile(c)
    bt = not batch and _load_transposed(L, op.operands[1], b)
    out = L.new_tile(shape, out_t)
    L.emit("dot", out_t, in_t, a=out, b=a, c=b, d=acc, e=(M << 16) | N, n=K, flags={"batch": batch, "bt": int(bt)})
    return out


def _load_transposed(L, value, b: Tile) -> bool:
    """`x @ w.T`: b was just loaded from memory where its K dimension is the contiguous one, so the load
    moves one element per stride. When that load is the tile's only writer and the dot its only reader,
    make the load write b's transpose ([N, K], contiguous rows) and let the dot read it transposed."""
    if len(b.shape) != 2 or len(b.buf.uses) != 1 or L.use_count(value) != 1:
        return False
    ld = L.mf[b.buf.uses[0]]
    dst = ld.args.get("a")
    if ld.op != "ld" or not isinstance(dst, Tile) or dst.buf is not b.buf or dst.off != b.off or dst.numel != b.numel:
        return False
    if ld.args.get("d", isa.NONE) != isa.NONE or (ld.args.get("e", isa.NONE) != isa.NONE and not ld.flags.get("bc_other")):
        return False  # a mask tile or a per-element `other` is laid out as [K, N]
    d = L.mf.descs[ld.args["c"]]
    es = dtypes.nbytes(b.dtype)
    if len(d.shape) != 2 or d.strides[0] != es or d.strides[1] == es:
        return False
    before = (d.shape, d.strides, d.limits)

    def undo():
        d.shape, d.strides, d.limits = before
    L.mf.record_undo(undo)
    d.shape, d.strides = d.shape[::-1], d.strides[::-1]
    if d.limits:
        d.limits = tuple(d.limits[::-1])
    return True


def storage_of_type(L, ty):
    """Fresh storage (a scalar register or a tile) for a value of ttir type ty across control flow."""
    return L.storage_for(None, tuple(ty.shape) if ty.kind == "tensor" else (), dtypes.storage(ty), False)


@handles("tt.call")
def lower_call(L, op):
    callee = L.module.functions.get(op.attrs["callee"])
    if callee is None:
        raise L.error(f"call to unknown function {op.attrs['callee']}")
    if L.call_depth > 32:
        raise L.error("recursion is not supported")
    args = [L.val(v) for v in op.operands]
    if len(callee.body.blocks) == 1:  # straight-line callee: its values are the results, no copies
        L.call_depth += 1
        try:
            return L.inline_region(callee.body, args)
        finally:
            L.call_depth -= 1
    L.call_depth += 1
    results = [storage_of_type(L, r.type) for r in op.results]
    end = Label()

    def on_return(vals):  # every tt.return of the callee: its values into the call's results
        L.parallel_store(results, vals)
        L.emit("jmp", a=end)
    try:
        L.lower_region(callee.body, args, on_return)
    finally:
        L.call_depth -= 1
    L.place(end)
    return results


@handles("tt.return")
def lower_return(L, op):
    L.emit("halt")


@handles("llvm.intr.assume", "ttg.barrier", "gpu.barrier")
def lower_nothing(L, op):
    if op.name != "llvm.intr.assume":
        L.emit("barrier")
    else:
        splits.assumed(L, op)  # tl.assume(pid_m >= 0): a fact for index splits
    return None


@handles("tt.extern_elementwise")
def lower_extern(L, op):
    from .. import libdevice
    symbol = op.attrs.get("symbol", "")
    entry = libdevice.lookup(symbol)
    if entry is None:
        raise L.error(f"extern function {symbol!r} is not provided by the Spyre libdevice")
    opcode, fn = entry
    srcs = [L.val(v) for v in op.operands]
    if opcode == "pred":
        return lower_float_predicate(L, fn, srcs[0], odtype(op))
    return L.elementwise(opcode, rdtype(op), srcs, flags={"fn": fn} if fn else {})


def lower_float_predicate(L, fn, x, dtype):
    """isnan / isinf / isfinite / signbit as an i1 comparison."""
    if fn == "isnan":
        return L.elementwise("cmpf", dtype, [x, x], out_dtype="i1", flags={"pred": "uno"})
    if fn == "signbit":
        s = L.elementwise("math1", dtype, [x], flags={"fn": "signbit"})
        return L.elementwise("cmpf", dtype, [s, Const(0.0, dtype)], out_dtype="i1", flags={"pred": "une"})
    mag = L.elementwise("math1", dtype, [x], flags={"fn": "abs"})
    pred = "oeq" if fn == "isinf" else "olt"
    return L.elementwise("cmpf", dtype, [mag, Const(float("inf"), dtype)], out_dtype="i1", flags={"pred": pred})


# -- debugging --------------------------------------------------------------------------------
@handles("tt.print")
def lower_print(L, op):
    """One print per operand. Its string is Triton's prefix (plus "(operand k) " when there are
    several operands) behind a header with the operand's shape, for `idx (i, j)` (runtime/print.h)."""
    prefix = op.attrs.get("prefix", "")
    signed = op.attrs.get("isSigned", ())
    for i, v in enumerate(op.operands):
        lv = L.val(v)
        dtype = dtypes.storage(v.type)
        # print reads n elements: a tensor operand must be a whole tile, even a splat
        o = L.tile(lv) if shape_of(lv) else L.scalar(lv)
        n = prod(shape_of(lv)) if shape_of(lv) else 1
        label = f"(operand {i}) " if len(op.operands) > 1 else ""
        L.prog.strings.append(f"\x1f{','.join(map(str, shape_of(lv)))}\x1f{prefix}{label}")
        L.emit("print", dtype, a=len(L.prog.strings) - 1, b=o, n=n,
               flags={"hex": int(bool(op.attrs.get("hex", False))),
                      "signed": int(bool(signed[i])) if i < len(signed) else 1, "scalar": int(not shape_of(lv))})
    if not op.operands:
        L.prog.strings.append(f"\x1f\x1f{prefix}")
        o = L.const_slot(Const(0, "i32"))
        L.emit("print", "i32", a=len(L.prog.strings) - 1, b=o, n=0, flags={"scalar": 1})
    return None


@handles("tt.unsplat")
def lower_unsplat(L, op):
    """The one element of a one-element tensor, as a scalar."""
    return L.scalar(L.val(op.operands[0]))


@handles("tt.assert")
def lower_assert(L, op):
    c = L.val(op.operands[0])
    o, bc = L.operand(c)
    L.prog.strings.append(op.attrs.get("message", "assertion failed"))
    n = prod(shape_of(c)) if shape_of(c) else 1
    L.emit("assert", "i1", a=o, b=len(L.prog.strings) - 1, n=n, flags={"bc_cond": int(bc and n > 1)})
    return None

