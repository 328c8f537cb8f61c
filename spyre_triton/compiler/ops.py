"""Op handlers for Triton's core ops: program ids, ranges and splats, pointers and memory, atomics,
reductions, dot, calls, extern functions, printing and assertions. One small function per TTIR op (or
family), in this module's `HANDLERS` (registry.py); elementwise arithmetic is ops_arith.py's.

Each handler takes the Lowering `L` and the op, emits instructions, and returns the lowered value(s)
of the op's results.
"""
from __future__ import annotations

from math import prod

from .. import isa, libdevice
from . import dtypes
from . import masks, registry, splits
from .mir import Label
from .ops_arith import _as_affine, affine_arith, cast_coef, odtype, rdtype, rtype, scale_affine
from .values import Affine, Bounds, Const, Facts, Tile, is_scalar, shape_of, splat_const

HANDLERS, handles = registry.table()


# -- program ids, ranges, splats ----------------------------------------------------------------
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
    arg = L.base_arg(op.operands[0])
    if isinstance(p, Affine) and p.is_splat and mask is None:  # one address (an index split to a scalar):
        out = L.new_scalar(dtype)  # load it once, a splat of the scalar
        L.emit("gather", dtype, a=out, b=L.scalar(p.base), n=1, flags={"bc_addr": 1, **arg})
        return Affine(out, p.coefs, p.shape, dtype)
    if isinstance(p, Affine) and not p.is_splat and isinstance(mask, Bounds):
        # an index-bound mask: the descriptor's bounds, no mask tile
        out = L.new_tile(shape_of(p), dtype)
        o, bc_o = L.operand(other) if other is not None else (None, False)
        L.emit("ld", dtype, a=out, b=L.scalar(p.base), c=dma_desc(L, p, mask), e=o, flags={"bc_other": int(bc_o), **arg})
        return out
    m, bc_m = mask_operand(L, mask)
    o, bc_o = L.operand(other) if other is not None else (None, False)
    if is_scalar(p):
        out = L.new_scalar(dtype)
        L.emit("gather", dtype, a=out, b=L.scalar(p), c=m, d=o, n=1,
               flags={"bc_addr": 1, "bc_mask": int(bc_m), "bc_other": int(bc_o), **arg})
        return out
    out = L.new_tile(shape_of(p), dtype)
    if isinstance(p, Affine) and not p.is_splat:
        L.emit("ld", dtype, a=out, b=L.scalar(p.base), c=dma_desc(L, p), d=m, e=o,
               flags={"bc_mask": int(bc_m), "bc_other": int(bc_o), **arg})
        return out
    addr, bc_a = L.operand(p)
    L.emit("gather", dtype, a=out, b=addr, c=m, d=o, n=out.numel,
           flags={"bc_addr": int(bc_a), "bc_mask": int(bc_m), "bc_other": int(bc_o), **arg})
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
    arg = L.base_arg(op.operands[0])
    if isinstance(p, Affine) and not p.is_splat and isinstance(mask, Bounds):
        src, bc_s = L.operand(v)
        L.emit("st", dtype, a=L.scalar(p.base), b=dma_desc(L, p, mask), c=src, flags={"bc_src": int(bc_s), **arg})
        return None
    m, bc_m = mask_operand(L, mask)
    src, bc_s = L.operand(v)
    if isinstance(p, Affine) and not p.is_splat:
        L.emit("st", dtype, a=L.scalar(p.base), b=dma_desc(L, p), c=src, d=m,
               flags={"bc_src": int(bc_s), "bc_mask": int(bc_m), **arg})
        return None
    addr, bc_a = L.operand(p)
    n = prod(shape_of(p)) if shape_of(p) else 1
    L.emit("scatter", dtype, a=addr, b=src, c=m, n=n, flags={"bc_addr": int(bc_a), "bc_src": int(bc_s),
                                                              "bc_mask": int(bc_m), **arg})
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
                  "bc_mask": int(bc_m and bool(shape)), "op": kind, **L.base_arg(op.operands[0])})
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
                  "bc_val": int(bc_v and bool(shape)), **L.base_arg(op.operands[0])})
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

