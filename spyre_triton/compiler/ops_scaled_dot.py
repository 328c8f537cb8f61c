"""`tt.dot_scaled` (`tl.dot_scaled`): a matmul of microscaled operands, lowered to integer and float
tile ops and one `dot`.

The semantics are those of Triton's decomposition for targets without block-scaled MMA
(DecomposeScaledBlocked), which is also what upstream's reference implementation computes:

- compute type `ct`: f16 if either operand is fp16, else bf16;
- each operand is upcast to `ct` exactly: fp8 (e4m3, e5m2) by conversion, e2m1 (two fp4 values per
  byte, the low nibble holding the element with the even index along the packed dimension) by
  building the `ct` bit patterns with integer ops; bf16 <-> fp16 rounds to nearest even;
- a scale (one per `group` elements along K) becomes a `ct` value: e8m0 `s` (i8) is 2^(s-127) built
  by shifting `s` into the exponent field (bf16 directly; for f16 through f32 and one rounding, so
  scales below f16's range become 0 or subnormal and those above it inf); 0xFF is NaN unless
  fastMath (then inf, as the shift makes it).
  An f8e4m3 scale (nvfp4, group 16) is converted exactly;
- the operand is multiplied by its broadcast scale in `ct` (one rounding: the runtime multiplies
  half-precision values in f32 and rounds once, which is the correctly rounded product);
- `dot` of the two `ct` tiles accumulates in f32 into c.

The printed form `%a scale %as, %b scale %bs, %c` does not say, after parsing, which operand a lone
scale belongs to; see `_scales`.
"""
from __future__ import annotations

from math import prod

from .. import isa
from . import dtypes
from . import registry
from .ops_arith import _dense_strides, rdtype, rtype
from .ops_tensor import tcopy
from .values import Const, Tile, splat_const

HANDLERS, handles = registry.table()

# storage dtype of each operand format (e2m1 travels packed in i8)
FORMAT_DTYPE = {"e2m1": "i8", "e4m3": "f8e4m3fn", "e5m2": "f8e5m2", "bf16": "bf16", "fp16": "f16"}
# the enum's order in TritonAttrDefs.td (the generic form may print the number)
FORMAT_ENUM = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "bf16", "fp16")
# elements along K that share one scale, by the scale's dtype
SCALE_GROUP = {"i8": 32, "f8e4m3fn": 16}
# (mantissa bits, exponent bias) of the compute types
CT_LAYOUT = {ct: (isa.DTYPE_BY_NAME[ct].fmt.mbits, isa.DTYPE_BY_NAME[ct].fmt.bias) for ct in ("bf16", "f16")}
# quiet NaN bit patterns of the float that the scale's exponent is shifted into
NAN_BITS = {"i16": isa.DTYPE_BY_NAME["bf16"].fmt.quiet_nan, "i32": isa.DTYPE_BY_NAME["f32"].fmt.quiet_nan}


@handles("tt.dot_scaled")
def lower_dot_scaled(L, op):
    a_fmt, b_fmt = _format(L, op, "a_elem_type"), _format(L, op, "b_elem_type")
    # the axis each operand's e2m1 pairs are packed along: K unless lhs_k_pack / rhs_k_pack is false
    a_pack = -1 if op.attrs.get("lhs_k_pack", True) else -2
    b_pack = -2 if op.attrs.get("rhs_k_pack", True) else -1
    for fmt, pack, k_axis, side in ((a_fmt, a_pack, -1, "lhs"), (b_fmt, b_pack, -2, "rhs")):
        if pack != k_axis and fmt != "e2m1":
            raise L.error(f"{side} in {fmt} packed along a dimension other than K (only e2m1 is packed)")
    a_shape = _logical_shape(op.operands[0].type.shape, a_fmt, a_pack)
    b_shape = _logical_shape(op.operands[1].type.shape, b_fmt, b_pack)
    if a_shape[:-2] != b_shape[:-2] or a_shape[-1] != b_shape[-2]:
        raise L.error(f"operands of {a_shape} and {b_shape} elements do not multiply")
    a_scale, b_scale = _scales(L, op, a_shape, b_shape)
    ct = "f16" if "fp16" in (a_fmt, b_fmt) else "bf16"
    fast = bool(op.attrs.get("fastMath", False))
    a = _scaled(L, _operand(L, op.operands[0], a_fmt, a_pack, ct), a_scale, True, fast)
    b = _scaled(L, _operand(L, op.operands[1], b_fmt, b_pack, ct), b_scale, False, fast)
    return _dot(L, op, a, b, ct)


# -- attributes and operands ---------------------------------------------------------------------
def _format(L, op, name) -> str:
    """The operand format: 'e2m1', ... (the generic form prints `scale_dot_elem_type e2m1` or a number)."""
    v = op.attrs.get(name)
    fmt = FORMAT_ENUM[v] if isinstance(v, int) and 0 <= v < len(FORMAT_ENUM) else str(v).split()[-1].lower()
    if fmt not in FORMAT_DTYPE:
        raise L.error(f"operand format {fmt} is not supported (supported: {', '.join(FORMAT_DTYPE)})")
    return fmt


def _logical_shape(shape, fmt, pack_axis) -> tuple:
    """The operand's shape in elements: e2m1 holds two along its packed axis."""
    shape = list(shape)
    if fmt == "e2m1":
        shape[pack_axis] *= 2
    return tuple(shape)


def _scales(L, op, a_shape, b_shape):
    """(a_scale, b_scale) values, None where absent.

    The parsed op lists the present scales after a, b, c without saying whose they are; the generic
    form's operandSegmentSizes says it, otherwise two scales are (a's, b's) and a lone one is
    attributed by its shape: [.., M, K/group] for a, [.., N, K/group] for b. When M == N the shape
    cannot tell, and guessing could silently compute the wrong product, so that is an error."""
    extra = list(op.operands[3:])
    fits_a = lambda s: _scale_fits(s.type, a_shape[:-2], a_shape[-2], a_shape[-1])
    fits_b = lambda s: _scale_fits(s.type, b_shape[:-2], b_shape[-1], b_shape[-2])
    seg = op.attrs.get("operandSegmentSizes")
    if seg is not None and len(seg) == 5:
        has_a, has_b = bool(seg[3]), bool(seg[4])
    elif len(extra) == 1 and fits_a(extra[0]) and fits_b(extra[0]):
        raise L.error(f"one scale of shape {list(extra[0].type.shape)} fits both operands (M == N), and the "
                      "parsed tt.dot_scaled does not say whose it is")
    elif len(extra) == 1:
        has_a = fits_a(extra[0])
        has_b = not has_a
    else:
        has_a = has_b = bool(extra)
    if len(extra) != has_a + has_b:
        raise L.error(f"{len(extra)} scale operands for {has_a + has_b} scaled operands")
    a_scale = extra[0] if has_a else None
    b_scale = extra[-1] if has_b else None
    for s, fits, dims in ((a_scale, fits_a, "M"), (b_scale, fits_b, "N")):
        if s is not None and not fits(s):
            raise L.error(f"scale of shape {list(s.type.shape)} and type {s.type.elem} fits neither operand "
                          f"(expected [.., {dims}, K/32] of e8m0 in i8, or [.., {dims}, K/16] of f8E4M3FN)")
    return (None if a_scale is None else L.val(a_scale)), (None if b_scale is None else L.val(b_scale))


def _scale_fits(ty, batch, rows, k) -> bool:
    group = SCALE_GROUP.get(dtypes.storage(ty))
    shape = tuple(ty.shape)
    return group is not None and shape == tuple(batch) + (rows, k // group) and k % group == 0


# -- upcasting the operands ------------------------------------------------------------------------
def _operand(L, value, fmt, pack_axis, ct) -> Tile:
    """The operand in elements of the compute type (exact, but bf16 <-> fp16 rounds)."""
    v = L.val(value)
    dtype = dtypes.storage(value.type)
    if dtype != FORMAT_DTYPE[fmt]:
        raise L.error(f"a {fmt} operand stored as {dtype} (expected {FORMAT_DTYPE[fmt]})")
    t = L.tile(v)
    if fmt == "e2m1":
        return _unpack_e2m1(L, t, pack_axis, ct)
    if dtype == ct:
        return t
    mode = "fpext" if dtypes.nbytes(dtype) < dtypes.nbytes(ct) else "rtne"
    return L.elementwise("cvt", ct, [t], flags={"mode": mode}, t2=dtype)


def _unpack_e2m1(L, packed: Tile, axis: int, ct: str) -> Tile:
    """Bytes of two fp4 values -> ct values, twice as many along `axis` (low nibble first)."""
    n = packed.numel
    wide = L.elementwise("cvt", "i16", [packed], flags={"mode": "zext"}, t2="i8")
    nibbles = L.new_tile((2, n), "i16")  # the low nibbles, then the high ones
    L.elementwise("and", "i16", [wide, Const(0xF, "i16")], out=nibbles.view((n,)))
    L.elementwise("shru", "i16", [wide, Const(4, "i16")], out=nibbles.view((n,), off=2 * n))
    bits = _e2m1_bits(L, nibbles, ct)
    # interleave: element 2j (2j+1) along the axis comes from the low (high) nibble of byte j
    axis %= len(packed.shape)
    pre, p, post = prod(packed.shape[:axis]), packed.shape[axis], prod(packed.shape[axis + 1:])
    shape = list(packed.shape)
    shape[axis] *= 2
    out = L.new_tile(tuple(shape), "i16")
    tcopy(L, out, bits, (pre, p, 2, post), (p * post, post, pre * p * post, 1))
    return out.view(dtype=ct)


def _e2m1_bits(L, nibbles: Tile, ct: str) -> Tile:
    """The ct bit patterns (i16) of fp4 e2m1 nibbles `s e e m`: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}."""
    mbits, bias = CT_LAYOUT[ct]
    ew = L.elementwise
    em = ew("and", "i16", [nibbles, Const(7, "i16")])
    sign = ew("shl", "i16", [ew("and", "i16", [nibbles, Const(8, "i16")]), Const(12, "i16")])
    half = (bias - 1) << mbits  # 0.5: the subnormal e2m1 value 0b001
    # normal (e >= 1): exponent e - 1 + bias, the mantissa bit on top of ct's mantissa
    normal = ew("add", "i16", [ew("shl", "i16", [em, Const(mbits - 1, "i16")]), Const(half, "i16")])
    is_normal = ew("cmpi", "i16", [em, Const(2, "i16")], out_dtype="i1", flags={"pred": "uge"})
    is_half = ew("cmpi", "i16", [em, Const(1, "i16")], out_dtype="i1", flags={"pred": "eq"})
    small = ew("select", "i16", [is_half, Const(half, "i16"), Const(0, "i16")])
    return ew("or", "i16", [ew("select", "i16", [is_normal, normal, small]), sign])


# -- scales --------------------------------------------------------------------------------------
def _scale_values(L, scale, ct: str, fast: bool) -> Tile:
    """The scales (one per group) as ct values."""
    t = L.tile(scale)
    if t.dtype == "f8e4m3fn":
        return L.elementwise("cvt", ct, [t], flags={"mode": "fpext"}, t2=t.dtype)
    # e8m0: the exponent field of a float with exponent bias 127 (bf16 itself; f16 through f32)
    wide, shift = ("i16", 7) if ct == "bf16" else ("i32", 23)
    bits = L.elementwise("shl", wide, [L.elementwise("cvt", wide, [t], flags={"mode": "zext"}, t2="i8"),
                                       Const(shift, wide)])
    if not fast:  # 0xFF is NaN (shifted, it would be inf)
        is_nan = L.elementwise("cmpi", "i8", [t, Const(-1, "i8")], out_dtype="i1", flags={"pred": "eq"})
        bits = L.elementwise("select", wide, [is_nan, Const(NAN_BITS[wide], wide), bits])
    if ct == "bf16":
        return bits.view(dtype="bf16")
    return L.elementwise("cvt", "f16", [bits.view(dtype="f32")], flags={"mode": "rtne"}, t2="f32")


def _scaled(L, v: Tile, scale, is_lhs: bool, fast: bool) -> Tile:
    """v times its scales, rounded once to v's dtype (the compute type)."""
    if scale is None:
        return v
    s = _scale_values(L, scale, v.dtype, fast)
    return L.elementwise("mul", v.dtype, [v, _broadcast_scale(L, s, v.shape, is_lhs)])


def _broadcast_scale(L, s: Tile, shape, is_lhs: bool) -> Tile:
    """Scales [.., R, K/g] spread over the operand's elements: [.., R, K] for a, [.., K, R] for b."""
    *batch, rows, groups = s.shape
    k = shape[-1] if is_lhs else shape[-2]
    g = k // groups
    out = L.new_tile(tuple(shape), s.dtype)
    lead = tuple(batch)
    lead_strides = tuple(_dense_strides(s.shape)[:len(batch)])
    if is_lhs:  # out[.., r, q*g + i] = s[.., r, q]
        tcopy(L, out, s, lead + (rows, groups, g), lead_strides + (groups, 1, 0))
    else:  # out[.., q*g + i, r] = s[.., r, q]
        tcopy(L, out, s, lead + (groups, g, rows), lead_strides + (1, 0, groups))
    return out


# -- the matmul ----------------------------------------------------------------------------------
def _dot(L, op, a: Tile, b: Tile, ct: str):
    """The same `dot` as tt.dot on ct operands: f32 accumulation into c."""
    c = L.val(op.operands[2])
    out_t, shape = rdtype(op), tuple(rtype(op).shape)
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if M >= 1 << 16 or N >= 1 << 16:
        raise L.error(f"dot of {M}x{N} exceeds the PE array's 65535 limit per side")
    acc = None
    zero = splat_const(c)
    if not (zero is not None and zero.value == 0):
        acc = L.tile(c)
    out = L.new_tile(shape, out_t)
    batch = a.shape[0] if len(a.shape) == 3 else 0
    L.emit("dot", out_t, ct, a=out, b=a, c=b, d=acc, e=(M << 16) | N, n=K, flags={"batch": batch})
    return out
