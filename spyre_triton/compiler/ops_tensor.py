"""Tensor-shaped op handlers: scans, join/split/cat, reshape, histogram, gather, map_elementwise.

In this module's `HANDLERS` (registry.py).

Techniques used here, all with existing instructions:
- moving data: `tcopy` (dense destination, element-strided source; stride 0 broadcasts) does
  transposes, broadcasts, column extraction and splits; a sub-tile is an offset view
  (`tile.view(shape, off=bytes)`), so whole row blocks of a tile are plain operands;
- `tt.scan`: the scanned axis is moved outermost ([len, rest]) so that "rows i..j" is one
  contiguous sub-tile; then a Hillis-Steele scan applies the user's combine region to whole row
  blocks, log2(len) steps. A reverse scan needs no flip: each step combines row i with row i+d
  (the rows later in the reversed order come first as the combine's left operand) instead of
  row i-d, which is what flip -> forward scan -> flip computes;
- `tt.histogram`, `tt.gather`: compare against an iota laid out on an extra axis, then reduce
  (add for counts, bitwise or of the selected bit patterns for gather, which is exact);
- `tt.map_elementwise`: the scalar region (which may hold a CFG of cf.br/cf.cond_br blocks) is
  lowered on whole tiles with per-lane predication when it is side-effect free and acyclic;
  otherwise element by element with real branches.
"""
from __future__ import annotations

from itertools import product
from math import prod

from .. import isa
from . import dtypes, masks, registry
from .errors import CompilationError
from .mir import Label
from .ops_arith import _and, _dense_strides, _not, rdtype, rtype, vector_affine
from .values import Affine, Bounds, Const, Tile, is_scalar, shape_of, splat_const

HANDLERS, handles = registry.table()

# Ops whose effect depends on running only in the lanes/elements that reach them.
EFFECT_OPS = {"tt.store", "tt.load", "tt.atomic_rmw", "tt.atomic_cas", "tt.print", "tt.assert", "tt.call",
              "scf.while"}
# map_elementwise lowered element by element: at most this many function calls (code size).
MAX_PER_ELEMENT = 4096
# Elements of the one-hot intermediates of gather/histogram built at once (LX use per chunk).
ONE_HOT_CHUNK = 1 << 14
# Above this many compare/select element operations a gather is refused (see lower_gather).
MAX_GATHER_WORK = 1 << 24

_INT_OF_SIZE = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}


# -- helpers ----------------------------------------------------------------------------------
def _esize(dtype):
    return dtypes.nbytes(dtype)


def _bits_dtype(dtype):
    """The integer dtype with dtype's width (for moving/or-ing bit patterns)."""
    return _INT_OF_SIZE[_esize(dtype)]


def _simplify(shape, strides):
    """Drop unit dims and merge dims that are contiguous in the source: fewer descriptor dims."""
    dims = [(s, st) for s, st in zip(shape, strides) if s != 1]
    merged = []
    for s, st in dims:
        if merged and merged[-1][1] == st * s:
            ps, _ = merged[-1]
            merged[-1] = (ps * s, st)
        else:
            merged.append((s, st))
    if not merged:
        merged = [(1, 0)]
    return tuple(s for s, _ in merged), tuple(st for _, st in merged)


def tcopy(L, dst: Tile, src: Tile, shape, strides):
    """dst (dense, prod(shape) elements) = src read with element `strides` over `shape`."""
    shape, strides = _simplify(tuple(shape), tuple(strides))
    dtype = src.dtype
    es = _esize(dtype)
    if len(shape) == 1 and strides[0] == 1:
        L.emit("copy", dtype, a=dst, b=src, n=shape[0])
        return
    if len(shape) <= isa.MAX_RANK:
        L.emit("tcopy", dtype, a=dst, b=src, c=L.desc(shape, strides))
        return
    k = len(shape) - isa.MAX_RANK
    inner_n = prod(shape[k:])
    for idx in product(*(range(s) for s in shape[:k])):
        d_off = sum(i * st for i, st in zip(idx, _dense_strides(shape[:k]))) * inner_n
        s_off = sum(i * st for i, st in zip(idx, strides[:k]))
        L.emit("tcopy", dtype, a=dst.view((inner_n,), off=d_off * es), b=src.view(off=s_off * es),
               c=L.desc(shape[k:], strides[k:]))


def permuted(L, src: Tile, order) -> Tile:
    """A new dense tile holding src with its dims permuted: out dim k is src dim order[k]."""
    strides = _dense_strides(src.shape)
    shape = tuple(src.shape[o] for o in order)
    out = L.new_tile(shape, src.dtype)
    tcopy(L, out, src, shape, tuple(strides[o] for o in order))
    return out


def _ensure(L, v, shape, dtype) -> Tile:
    """v (any lowered value of `shape` or a scalar) as a dense tile of `shape`."""
    if isinstance(v, Tile) and v.numel == prod(shape):
        return v.view(tuple(shape))
    out = L.new_tile(tuple(shape), dtype)
    L.store_into(out, v)
    return out


def _or(L, a, b):
    if a is None or b is None:
        return None
    return L.elementwise("or", "i1", [a, b])


def _iota_along(L, shape, axis, dtype) -> Tile:
    """A tile of `shape` whose element is its index along `axis`."""
    n = shape[axis]
    r = L.new_tile((n,), dtype)
    L.emit("iota", dtype, a=r, b=0, n=n)
    if prod(shape) == n:
        return r.view(tuple(shape))
    out = L.new_tile(tuple(shape), dtype)
    tcopy(L, out, r, shape, tuple(1 if k == axis else 0 for k in range(len(shape))))
    return out


def _bounded(L, v):
    """v, materialised if it is an affine value of more dims than a descriptor has: the shared
    materialisation (lower.py) describes the whole shape with one descriptor. Dims are merged
    first, so tl.sort's [2, 2, ..., 2] views of ranges become small dense tiles."""
    if not isinstance(v, Affine) or len(v.shape) <= isa.MAX_RANK or v.is_splat:
        return v
    dims = []
    for s, c in zip(v.shape, v.coefs):
        if s == 1:
            continue
        if dims:
            ps, pc = dims[-1]
            if pc is None and c is None:
                dims[-1] = (ps * s, None)
                continue
            if isinstance(pc, Const) and isinstance(c, Const) and pc.value == c.value * s:
                dims[-1] = (ps * s, c)
                continue
        dims.append((s, c))
    if len(dims) > isa.MAX_RANK:
        raise L.error(f"a {len(v.shape)}-d index tensor that does not fold to {isa.MAX_RANK} dims")
    flat = Affine(v.base, tuple(c for _, c in dims), tuple(s for s, _ in dims), v.dtype)
    out = L.new_tile(v.shape, v.dtype)
    L.materialize(flat, into=out.view(flat.shape))
    return out


def _broadcast_to(L, t: Tile, src_shape, shape) -> Tile:
    """t (dense, src_shape) broadcast to shape (same rank; size-1 dims, or 0-stride dims)."""
    st = _dense_strides(src_shape)
    out = L.new_tile(tuple(shape), t.dtype)
    tcopy(L, out, t, shape, tuple(0 if a != b else s for a, b, s in zip(src_shape, shape, st)))
    return out


# -- scans --------------------------------------------------------------------------------------
@handles("tt.scan")
def lower_scan(L, op):
    """Hillis-Steele on [len, outer, inner] (the scanned axis outermost, so a run of positions is one
    contiguous row block): log2(len) steps, each one application of the combine region to whole row
    blocks, reading the previous step's buffer and writing a fresh one (double buffering, freed by
    liveness). Forward: row i >= d becomes combine(row i-d, row i). Reverse, which Triton defines as
    flip -> scan -> flip: row i < len-d becomes combine(row i+d, row i); no flip is needed."""
    axis = op.attrs["axis"]
    reverse = bool(op.attrs.get("reverse", False))
    srcs = [L.tile(L.val(v)) for v in op.operands]
    shape = tuple(srcs[0].shape)
    outer, n, inner = prod(shape[:axis]), shape[axis], prod(shape[axis + 1:])
    rest = outer * inner
    work = []
    for s in srcs:
        if outer == 1:
            work.append(s.view((n * rest,)))  # already [len, rest]; read-only, never written
        else:
            w = L.new_tile((n * rest,), s.dtype)
            tcopy(L, w, s, (n, outer, inner), (inner, n * inner, 1))
            work.append(w)
    d = 1
    while d < n:
        m = (n - d) * rest
        lo = [w.view((m,)) for w in work]  # rows [0, n-d)
        hi = [w.view((m,), off=d * rest * _esize(w.dtype)) for w in work]  # rows [d, n)
        args = hi + lo if reverse else lo + hi
        results = L.inline_region(op.regions[0], args)
        L.set_loc(op.loc)
        L.cur_op = op
        new = [L.new_tile((n * rest,), w.dtype) for w in work]
        for w, nw, r in zip(work, new, results):
            es = _esize(w.dtype)
            changed = nw.view((m,)) if reverse else nw.view((m,), off=d * rest * es)
            if not L.retarget(r, changed):
                L.store_into(changed, r)
            kept_off = m * es if reverse else 0  # the d rows the step leaves as they are
            L.emit("copy", w.dtype, a=nw.view((d * rest,), off=kept_off), b=w.view((d * rest,), off=kept_off),
                   n=d * rest)
        work = new
        d *= 2
    outs = []
    for w in work:
        if outer == 1:
            outs.append(w.view(shape))
        else:
            o = L.new_tile(shape, w.dtype)
            tcopy(L, o, w, (outer, n, inner), (inner, outer * inner, 1))
            outs.append(o)
    return outs


# -- join / split / cat / reshape ---------------------------------------------------------------
@handles("tt.broadcast")
def lower_broadcast(L, op):
    v = L.val(op.operands[0])
    shape = tuple(rtype(op).shape)
    if isinstance(v, Bounds):
        b = masks.broadcast(v, shape)
        v = b if b is not None else masks.materialize(L, v)
        if b is not None:
            return b
    if isinstance(v, Affine):
        coefs = tuple(None if s != t else c for c, s, t in zip(v.coefs, v.shape, shape))
        return _bounded(L, Affine(v.base, coefs, shape, v.dtype))
    if is_scalar(v):
        return Affine(v, (None,) * len(shape), shape, v.dtype)
    if v.shape == shape:
        return v
    va = vector_affine(v) if len(shape) <= isa.MAX_RANK else None
    if va is not None:  # a row or column of integers (offsets, indices): broadcast lazily, as an offset vector
        return Affine(va.base, tuple(None if s != t else c for c, s, t in zip(va.coefs, v.shape, shape)), shape, v.dtype)
    return _broadcast_to(L, v, v.shape, shape)


@handles("tt.trans")
def lower_trans(L, op):
    """Any permutation of any rank: one tcopy (descriptor dims merged where contiguous, and split
    into several tcopys beyond the descriptor's 6 dims, as tl.sort's [2, 2, ..., 2] views need)."""
    v, order = L.val(op.operands[0]), tuple(op.attrs["order"])
    shape = tuple(rtype(op).shape)
    if isinstance(v, Bounds):
        return masks.permute(v, order, shape)
    if isinstance(v, Affine):
        return _bounded(L, Affine(v.base, tuple(v.coefs[o] for o in order), shape, v.dtype))
    return permuted(L, L.tile(v), order)


@handles("tt.join")
def lower_join(L, op):
    a, b = L.val(op.operands[0]), L.val(op.operands[1])
    shape = tuple(rtype(op).shape)
    dtype = rdtype(op)
    if isinstance(a, Affine) and isinstance(b, Affine) and a.coefs == b.coefs and not dtypes.is_float(dtype):
        # integers (and pointers) stay affine: the new last dim has coefficient b - a
        step = L.s_binop("sub", b.base, a.base, a.base.dtype)
        if isinstance(step, Const) and step.value == 0:
            step = None
        return Affine(a.base, tuple(a.coefs) + (step,), shape, dtype)
    n = prod(shape[:-1])
    es = _esize(dtype)
    tmp = L.new_tile((2, n), dtype)
    L.store_into(tmp.view((n,)), a)
    L.store_into(tmp.view((n,), off=n * es), b)
    out = L.new_tile(shape, dtype)
    tcopy(L, out, tmp, (n, 2), (1, n))
    return out


@handles("tt.split")
def lower_split(L, op):
    v = L.val(op.operands[0])
    shape = tuple(rtype(op).shape)
    dtype = rdtype(op)
    if isinstance(v, Affine) and not isinstance(v.coefs[-1], Tile):
        last = v.coefs[-1]
        coefs = tuple(v.coefs[:-1])
        rhs_base = v.base if last is None else L.s_binop("add", v.base, last, v.base.dtype)
        return [Affine(v.base, coefs, shape, dtype), Affine(rhs_base, coefs, shape, dtype)]
    t = L.tile(v)
    n = prod(shape)
    es = _esize(dtype)
    outs = []
    for k in range(2):
        o = L.new_tile(shape, dtype)
        tcopy(L, o, t.view(off=k * es), (n,), (2,))
        outs.append(o)
    return outs


@handles("tt.cat")
def lower_cat(L, op):
    a, b = L.val(op.operands[0]), L.val(op.operands[1])
    shape = tuple(rtype(op).shape)
    dtype = rdtype(op)
    out = L.new_tile(shape, dtype)
    na = prod(shape_of(a)) if shape_of(a) else 1
    nb = prod(shape_of(b)) if shape_of(b) else 1
    L.store_into(out.view((na,)), a)
    L.store_into(out.view((nb,), off=na * _esize(dtype)), b)
    return out


def _reshape_affine(L, v: Affine, shape):
    """The affine form of v reshaped (row-major) to shape, or None when it is not affine.

    Source and result dims are matched in groups with equal element counts; a group stays affine
    when its varying source dims chain like one flat index (coef[k] == coef[k+1] * size[k+1])."""
    src = list(zip(v.shape, v.coefs))
    dst = list(shape)
    out_coefs = []
    i = j = 0
    while i < len(src) or j < len(dst):
        gi, gj, ps, pt = [], [], 1, 1
        if i < len(src):
            gi.append(src[i])
            ps *= src[i][0]
            i += 1
        if j < len(dst):
            gj.append(dst[j])
            pt *= dst[j]
            j += 1
        while ps != pt:
            if ps < pt and i < len(src):
                gi.append(src[i])
                ps *= src[i][0]
                i += 1
            elif pt < ps and j < len(dst):
                gj.append(dst[j])
                pt *= dst[j]
                j += 1
            else:
                return None
        dims = [(s, c) for s, c in gi if s != 1]
        if all(c is None for _, c in dims):
            out_coefs += [None] * len(gj)
            continue
        if any(c is None for _, c in dims):
            return None
        if any(isinstance(c, Tile) for _, c in dims):  # an offset vector survives only unit dims added or dropped
            if len(dims) != 1 or sum(t != 1 for t in gj) != 1:
                return None
            out_coefs += [dims[0][1] if t != 1 else None for t in gj]
            continue
        for (_, c0), (s1, c1) in zip(dims, dims[1:]):
            if not (isinstance(c0, Const) and isinstance(c1, Const)) or c0.value != c1.value * s1:
                return None
        unit = dims[-1][1]
        coefs, acc = [], 1
        for t in reversed(gj):
            coefs.append(None if t == 1 else L.s_binop("mul", unit, Const(acc, unit.dtype), unit.dtype))
            acc *= t
        out_coefs += reversed(coefs)
    return Affine(v.base, tuple(out_coefs), tuple(shape), v.dtype)


@handles("tt.reshape")
def lower_reshape(L, op):
    v = L.val(op.operands[0])
    shape = tuple(rtype(op).shape)
    # allow_reorder/efficient_layout let the compiler pick any element order; row-major order
    # (a view of the same dense tile) is one valid choice, and the one the programs expect.
    if isinstance(v, Affine):
        if v.is_splat:
            return Affine(v.base, (None,) * len(shape), shape, v.dtype)
        r = _reshape_affine(L, v, shape)
        if r is not None:
            return _bounded(L, r)
    return L.tile(v).view(shape)


@handles("tt.expand_dims")
def lower_expand_dims(L, op):
    v, axis = L.val(op.operands[0]), op.attrs["axis"]
    shape = tuple(rtype(op).shape)
    if isinstance(v, Bounds):
        return masks.expand_dims(v, axis, shape)
    if isinstance(v, Affine):
        coefs = list(v.coefs)
        coefs.insert(axis, None)
        return _bounded(L, Affine(v.base, tuple(coefs), shape, v.dtype))
    return L.tile(v).view(shape)


# -- histogram and gather ---------------------------------------------------------------------
@handles("tt.histogram")
def lower_histogram(L, op):
    """counts[j] = #{i : x[i] == j and mask[i]} for 0 <= j < bins (values outside are ignored)."""
    x = L.tile(L.val(op.operands[0]))
    mask = L.val(op.operands[1]) if len(op.operands) > 1 else None
    bins = rtype(op).shape[0]
    out_t = rdtype(op)
    n = x.numel
    x = x.view((n,))
    dt = x.dtype
    if _esize(dt) < 4:  # compare in i32 so that bins beyond the input type's range never match
        x = L.elementwise("cvt", "i32", [x], flags={"mode": "sext"}, t2=dt)
        dt = "i32"
    always = splat_const(mask)  # None for no mask, too
    if mask is not None and not (always is not None and always.value):
        x = L.elementwise("select", dt, [mask, x, Const(-1, dt)])  # -1 is in no bin
    chunk = max(1, min(n, ONE_HOT_CHUNK // bins))
    out = None
    jb = _iota_along(L, (bins, chunk), 0, dt)  # the bin of each row, for every element of a chunk
    for c0 in range(0, n, chunk):
        c = min(chunk, n - c0)
        xs = x.view((c,), off=c0 * _esize(dt))
        xb = L.new_tile((bins, c), dt)
        tcopy(L, xb, xs, (bins, c), (0, 1))
        if c != chunk:
            jb = _iota_along(L, (bins, c), 0, dt)
        eq = L.elementwise("cmpi", dt, [xb, jb], out_dtype="i1", flags={"pred": "eq"})
        ones = L.elementwise("cvt", out_t, [eq], flags={"mode": "zext"}, t2="i1")
        part = L.new_tile((bins,), out_t)
        L.emit("red", out_t, a=part, b=ones, c=bins, d=c, e=1, flags={"op": "add"})
        out = part if out is None else L.elementwise("add", out_t, [out, part])
    return out


@handles("tt.gather")
def lower_gather(L, op):
    """out[o, j, i] = src[o, idx[o, j, i], i] along `axis`.

    Spyre's only gathers read device memory (`gather` takes 64-bit device addresses); there is no
    instruction that indexes LX with a tile of indices. So this is a one-hot lowering: for every
    candidate position k on the axis, compare idx == k, select src's bit pattern where equal, and
    or-reduce over k. Exact for every dtype (bit patterns, no arithmetic), but it costs
    numel(out) * len(axis) element operations; out-of-range indices give 0.
    """
    src = L.tile(L.val(op.operands[0]))
    idx = L.tile(L.val(op.operands[1]))
    axis = op.attrs["axis"]
    shape = tuple(rtype(op).shape)
    dtype = rdtype(op)
    O, K, In = prod(src.shape[:axis]), src.shape[axis], prod(src.shape[axis + 1:])
    J = idx.shape[axis]
    work = O * J * K * In
    if work > MAX_GATHER_WORK:
        raise L.error(
            f"tl.gather of {list(idx.shape)} indices into {list(src.shape)} along axis {axis} needs {work} "
            f"compare/select operations: Spyre has no instruction that gathers from LX by an index tile "
            f"(gather reads device memory), so gather is lowered one-hot, limited to {MAX_GATHER_WORK}. "
            f"Use smaller blocks, or tl.load with the computed offsets from device memory")
    bits_t = _bits_dtype(dtype)
    sb = src.view(dtype=bits_t)
    it = idx.dtype
    if _esize(it) < 4:
        idx = L.elementwise("cvt", "i32", [idx], flags={"mode": "sext"}, t2=it)
        it = "i32"
    per_k = O * J * In
    kc = 1
    while kc * 2 <= K and per_k * kc * 2 <= ONE_HOT_CHUNK:
        kc *= 2
    acc = None
    es = _esize(bits_t)
    # [O, J, kc, In]: idx broadcast over the chunk's positions, and the position each one stands for
    i4 = L.new_tile((O, J, kc, In), it)
    tcopy(L, i4, idx, (O, J, kc, In), (J * In, In, 0, 1))
    k4 = _iota_along(L, (O, J, kc, In), 2, it)
    for k0 in range(0, K, kc):
        # src rows k0 .. k0+kc-1 broadcast over j
        s4 = L.new_tile((O, J, kc, In), bits_t)
        tcopy(L, s4, sb.view(off=k0 * In * es), (O, J, kc, In), (K * In, 0, In, 1))
        pos = k4 if k0 == 0 else L.elementwise("add", it, [k4, Const(k0, it)])
        eq = L.elementwise("cmpi", it, [i4, pos], out_dtype="i1", flags={"pred": "eq"})
        sel = L.elementwise("select", bits_t, [eq, s4, Const(0, bits_t)])
        if kc == 1:
            part = sel.view((O * J * In,))
        else:
            part = L.new_tile((O * J * In,), bits_t)
            L.emit("red", bits_t, a=part, b=sel, c=O * J, d=kc, e=In, flags={"op": "or"})
        acc = part if acc is None else L.elementwise("or", bits_t, [acc, part])
    return acc.view(shape, dtype=dtype)


# -- map_elementwise ----------------------------------------------------------------------------
def _walk_ops(block):
    for op in block.ops:
        yield op
        for r in op.regions:
            for b in r.blocks:
                yield from _walk_ops(b)


def has_effects(op) -> bool:
    if op.name in EFFECT_OPS:
        return True
    return any(o.name in EFFECT_OPS for r in op.regions for b in r.blocks for o in _walk_ops(b))


def _succ_args(term):
    """[(block, [operand values])] of a cf.br / cf.cond_br (cond_br's condition is operands[0])."""
    ops = list(term.operands)
    if term.name == "cf.cond_br":
        ops = ops[1:]
    out = []
    for s in term.successors:
        k = len(s.args)
        out.append((s, ops[:k]))
        ops = ops[k:]
    return out


def _topo_order(blocks):
    """Blocks in an order where every block comes after its predecessors, or None if cyclic."""
    index = {id(b): i for i, b in enumerate(blocks)}
    state, order = {}, []

    def visit(b):
        s = state.get(id(b))
        if s == 1:
            return False
        if s == 2:
            return True
        state[id(b)] = 1
        for succ in b.ops[-1].successors if b.ops else []:
            if id(succ) in index and not visit(succ):
                return False
        state[id(b)] = 2
        order.append(b)
        return True

    if not visit(blocks[0]):
        return None
    return list(reversed(order))


def _merge(L, edges, dtype):
    """The value a block argument gets from its incoming (mask, value) edges."""
    for m, v in edges:
        if m is None:
            return v
    v = edges[0][1]
    for m, e in edges[1:]:
        v = L.elementwise("select", dtype, [m, e, v])
    return v


def _lower_ops(L, block, mask):
    for op in block.ops[:-1]:
        if mask is not None and has_effects(op):
            raise L.error(f"{op.name} in a branch of a map_elementwise function")
        L.lower_op(op)
    term = block.ops[-1]
    L.cur_op = term
    L.set_loc(term.loc)
    return term


def _map_vectorized(L, region, args):
    """Lower the scalar region once on whole tiles: every block runs on every lane, block arguments
    and results merge with selects on per-lane masks. Needs an acyclic CFG."""
    blocks = region.blocks
    order = _topo_order(blocks)
    if order is None:
        raise L.error("map_elementwise function with a loop in its control flow")
    incoming = {id(b): [] for b in blocks}
    returns = []
    for b in order:
        if b is blocks[0]:
            mask = None
            for a, v in zip(b.args, args):
                L.values[a] = v
        else:
            edges = incoming[id(b)]
            if not edges:
                continue
            mask = edges[0][0]
            for m, _ in edges[1:]:
                mask = _or(L, mask, m)
            for k, a in enumerate(b.args):
                L.values[a] = _merge(L, [(m, vals[k]) for m, vals in edges], dtypes.storage(a.type))
        term = _lower_ops(L, b, mask)
        if term.name == "tt.map_elementwise.return":
            returns.append((mask, [L.val(v) for v in term.operands]))
        elif term.name == "cf.br":
            (s, vals), = _succ_args(term)
            incoming[id(s)].append((mask, [L.val(v) for v in vals]))
        elif term.name == "cf.cond_br":
            c = L.val(term.operands[0])
            (t, tv), (f, fv) = _succ_args(term)
            incoming[id(t)].append((_and(L, mask, c), [L.val(v) for v in tv]))
            incoming[id(f)].append((_and(L, mask, _not(L, c)), [L.val(v) for v in fv]))
        else:
            raise L.error(f"unexpected terminator {term.name} in a map_elementwise function")
    if not returns:
        raise L.error("map_elementwise function never returns")
    n = len(returns[0][1])
    return [_merge(L, [(m, vals[k]) for m, vals in returns], returns[0][1][k].dtype) for k in range(n)]


def _map_scalar_cfg(L, region, args, on_return):
    """Lower the region once on scalar registers, with real branches (one element's call)."""
    blocks = region.blocks
    labels = {id(b): Label() for b in blocks}
    end = Label()
    slots = {id(b): [L.new_scalar(dtypes.storage(a.type)) for a in b.args] for b in blocks[1:]}
    start = L.mf.here()
    pos = {id(b): i for i, b in enumerate(blocks)}
    back_edge = False
    for i, b in enumerate(blocks):
        L.place(labels[id(b)])
        vals = args if i == 0 else slots[id(b)]
        for a, v in zip(b.args, vals):
            L.values[a] = v
        term = _lower_ops(L, b, None)
        if term.name == "tt.map_elementwise.return":
            on_return([L.val(v) for v in term.operands])
            if i != len(blocks) - 1:
                L.emit("jmp", a=end)
            continue
        succ = _succ_args(term)
        back_edge |= any(pos[id(s)] <= i for s, _ in succ)
        if term.name == "cf.br":
            (s, sv), = succ
            L.parallel_store(slots[id(s)], [L.val(v) for v in sv])
            L.emit("jmp", a=labels[id(s)])
        elif term.name == "cf.cond_br":
            (t, tv), (f, fv) = succ
            other = Label()
            L.emit("brz", "i1", a=L.scalar(L.val(term.operands[0])), b=other)
            L.parallel_store(slots[id(t)], [L.val(v) for v in tv])
            L.emit("jmp", a=labels[id(t)])
            L.place(other)
            L.parallel_store(slots[id(f)], [L.val(v) for v in fv])
            L.emit("jmp", a=labels[id(f)])
        else:
            raise L.error(f"unexpected terminator {term.name} in a map_elementwise function")
    L.place(end)
    if back_edge:
        L.mf.add_loop(start)


def _with_lane_storage(L, lane_shape, fn):
    """Run fn with loop-carried and if-result storage of the region's scalar-typed values made
    lane-shaped tiles: inside a map_elementwise function lowered on whole tiles, a scalar of the
    function is a tile of lanes (scf.for with uniform bounds then works lane-parallel)."""
    orig = L.storage_for

    def storage_for(v, shape, dtype, keep_affine):
        if not shape:
            return L.new_tile(lane_shape, dtype)
        return orig(v, shape, dtype, keep_affine)

    L.storage_for = storage_for
    try:
        return fn()
    finally:
        del L.storage_for


@handles("tt.map_elementwise")
def lower_map_elementwise(L, op):
    pack = int(op.attrs.get("pack", 1))
    region = op.regions[0]
    shape = tuple(rtype(op).shape)
    n = prod(shape)
    groups = n // pack
    res_t = [dtypes.storage(r.type) for r in op.results]
    ins = [L.val(v) for v in op.operands]
    mark = L.mf.checkpoint()
    try:
        if pack == 1:
            args = ins
        else:
            args = []
            for v in ins:
                t = L.tile(v).view((n,))
                es = _esize(t.dtype)
                for j in range(pack):
                    col = L.new_tile((groups,), t.dtype)
                    tcopy(L, col, t.view(off=j * es), (groups,), (pack,))
                    args.append(col)
        lanes = shape if pack == 1 else (groups,)
        vals = _with_lane_storage(L, lanes, lambda: _map_vectorized(L, region, args))
        L.cur_op = op
        L.set_loc(op.loc)
        if pack == 1:
            return [v if isinstance(v, Affine) and v.shape == shape else _ensure(L, v, shape, t)
                    for v, t in zip(vals, res_t)]
        outs = []
        for r, t in enumerate(res_t):
            tmp = L.new_tile((pack, groups), t)
            for j in range(pack):
                L.store_into(tmp.view((groups,), off=j * groups * _esize(t)), vals[r * pack + j])
            o = L.new_tile(shape, t)
            tcopy(L, o, tmp, (groups, pack), (1, groups))
            outs.append(o)
        return outs
    except CompilationError as vec_error:
        L.mf.rollback(mark)
        L.cur_op = op
        L.set_loc(op.loc)
        if groups > MAX_PER_ELEMENT:
            raise L.error(
                f"this map_elementwise function cannot run on whole tiles ({vec_error.message.splitlines()[0]}); "
                f"element by element it is limited to {MAX_PER_ELEMENT} calls, and this one makes {groups}. "
                f"Use smaller blocks") from None
    # element by element: one inlined call per group of `pack` elements
    tins = [L.tile(v).view((n,)) for v in ins]
    outs = [L.new_tile((n,), t) for t in res_t]
    for g in range(groups):
        args = []
        for t in tins:
            for j in range(pack):
                args.append(L.scalar(t.view((1,), off=(g * pack + j) * _esize(t.dtype))))

        def on_return(vals, g=g):
            for r, o in enumerate(outs):
                for j in range(pack):
                    L.store_into(o.view((1,), off=(g * pack + j) * _esize(o.dtype)), vals[r * pack + j])

        _map_scalar_cfg(L, region, args, on_return)
        L.cur_op = op
        L.set_loc(op.loc)
    return [o.view(shape) for o in outs]


@handles("tt.elementwise_inline_asm")
def lower_inline_asm(L, op):
    raise L.error("inline assembly is GPU-specific and is not supported on Spyre")
