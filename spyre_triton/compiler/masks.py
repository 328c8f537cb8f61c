"""Mask analysis: masks that are index bounds become DMA descriptor bounds.

Most Triton masks say "this element's index is inside the tensor": `offs < n`, or
`(rm[:, None] < M) & (rn[None, :] < N)`. When the compared value is affine with unit step along one
dimension, the mask is `idx[d] < limit[d]` for a scalar limit, and a load or store through an
affine pointer takes the limits into its descriptor: the DMA engine moves the in-bounds box and
fills the rest, with no mask tile computed or read. Anything else is materialised as an i1 tile.
"""
from __future__ import annotations

from math import prod

from .. import isa

from . import dtypes, splits
from .values import Affine, Bounds, Const, Scalar, Tile, is_scalar

# predicate -> (affine on the left?, inclusive?) for `affine PRED scalar` / `scalar PRED affine`
_LEFT = {"slt": False, "sle": True}
_RIGHT = {"sgt": False, "sge": True}


def from_cmp(L, pred: str, a, b, dtype: str):
    """Bounds for `a pred b`, or None when it is not an index bound."""
    if pred in _LEFT:
        idx, lim, inclusive = a, b, _LEFT[pred]
    elif pred in _RIGHT:
        idx, lim, inclusive = b, a, _RIGHT[pred]
    else:
        return None
    if not isinstance(idx, Affine) or idx.is_splat:
        return None
    if is_scalar(lim):
        bound = lim
    elif isinstance(lim, Affine) and lim.is_splat:
        bound = lim.base
    else:
        return None
    varying = [d for d, c in enumerate(idx.coefs) if c is not None]
    if len(varying) != 1:
        return None
    d = varying[0]
    if not (isinstance(idx.coefs[d], Const) and idx.coefs[d].value == 1) or splits.may_wrap(idx):
        return None
    # base + i < bound  <=>  i < bound - base   (i <= x  <=>  i < x + 1); i64 so nothing wraps
    limit = L.s_binop("sub", L.s_cast(bound, "i64"), L.s_cast(idx.base, "i64"), "i64")
    if inclusive:
        limit = L.s_binop("add", limit, Const(1, "i64"), "i64")
    limits = tuple(limit if k == d else None for k in range(len(idx.shape)))
    return Bounds(limits, idx.shape)


def both(L, a: Bounds, b: Bounds) -> Bounds:
    """a & b: the tighter limit in every dimension."""
    limits = []
    for x, y in zip(a.limits, b.limits):
        if x is None or y is None:
            limits.append(x if y is None else y)
        else:
            limits.append(_min(L, x, y))
    return Bounds(tuple(limits), a.shape)


def _min(L, x, y):
    if isinstance(x, Const) and isinstance(y, Const):
        return Const(min(x.value, y.value), "i64")
    out = L.new_scalar("i64")
    L.emit("mins", "i64", a=out, b=L.scalar(x), c=L.scalar(y), n=1)
    return out


def broadcast(b: Bounds, shape) -> Bounds | None:
    """b broadcast to shape, or None when a bounded size-1 dim would grow (then it is not a box)."""
    for lim, s, t in zip(b.limits, b.shape, shape):
        if s != t and lim is not None:
            return None
    return Bounds(b.limits, tuple(shape))


def expand_dims(b: Bounds, axis: int, shape) -> Bounds:
    limits = list(b.limits)
    limits.insert(axis, None)
    return Bounds(tuple(limits), tuple(shape))


def permute(b: Bounds, order, shape) -> Bounds:
    return Bounds(tuple(b.limits[o] for o in order), tuple(shape))


def selectable(b: Bounds) -> bool:
    return any(lim is not None for lim in b.limits) and len(b.shape) <= isa.MAX_RANK


def select(L, b: Bounds, x, y, dtype: str, x_value=None) -> Tile:
    """`where(b, x, y)` as one bsel over a descriptor with b's limits: no i1 tile, and a copy of x
    when no bound clips (the usual case away from the tails). When x is a tile nothing else reads
    (its TTIR value `x_value` has this one use), the bsel works in place: nothing to do unless a
    bound clips."""
    ox, bcx = L.operand(x)
    oy, bcy = L.operand(y)
    in_place = (isinstance(ox, Tile) and not bcx and x_value is not None and L.use_count(x_value) == 1
                and len(set(ox.buf.uses)) == 1 and ox.off == 0 and ox.shape == tuple(b.shape) and dtypes.nbytes(ox.dtype) == dtypes.nbytes(dtype)
                and not (isinstance(oy, Tile) and oy.buf is ox.buf))
    out = ox.view(dtype=dtype) if in_place else L.new_tile(b.shape, dtype)
    flags = {f: 1 for f, bc in (("bc2", bcx), ("bc3", bcy)) if bc}
    t = "i8" if dtype.startswith("f8") else dtype  # moves bytes: fp8 as i8
    L.emit("bsel", t, a=out, b=L.desc(b.shape, (0,) * len(b.shape), limit_slots(L, b)), c=ox, d=oy, n=prod(b.shape),
           flags=flags)
    return out


def materialize(L, b: Bounds) -> Tile:
    """The mask as an i1 tile: one bmask over a descriptor with b's limits."""
    if any(lim is not None for lim in b.limits) and len(b.shape) <= isa.MAX_RANK:
        out = L.new_tile(b.shape, "i1")
        L.emit("bmask", "i1", a=out, c=L.desc(b.shape, (0,) * len(b.shape), limit_slots(L, b)))
        return out
    out = None
    n = prod(b.shape)
    for d, lim in enumerate(b.limits):
        if lim is None:
            continue
        r = L.new_tile((b.shape[d],), "i64")
        L.emit("iota", "i64", a=r, b=0, n=b.shape[d])
        m = L.new_tile((b.shape[d],), "i1")
        L.emit("cmpi", "i64", a=m, b=r, c=L.scalar(lim), n=b.shape[d], flags={"bc2": 1, "pred": "slt"})
        if b.shape[d] != n:
            full = L.new_tile(b.shape, "i1")
            strides = tuple(1 if k == d else 0 for k in range(len(b.shape)))
            L.emit("tcopy", "i1", a=full, b=m, c=L.desc(b.shape, strides))
            m = full
        else:
            m = m.view(b.shape)
        if out is None:
            out = m
        else:
            L.emit("and", "i1", a=out, b=out, c=m, n=n)
    if out is None:
        out = L.new_tile(b.shape, "i1")
        L.emit("copy", "i1", a=out, b=L.const_slot(Const(1, "i1")), n=n, flags={"bc1": 1})
    return out


def limit_slots(L, b: Bounds):
    """The descriptor's per-dimension limits: scalar registers (None where unbounded)."""
    return tuple(None if lim is None else L.scalar(lim) for lim in b.limits)


__all__ = ["from_cmp", "both", "broadcast", "expand_dims", "permute", "materialize", "limit_slots", "Scalar"]
