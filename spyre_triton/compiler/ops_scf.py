"""Op handlers for the scf dialect: scf.for, scf.if, scf.while (scf.yield and scf.condition end their
regions). In this module's `HANDLERS` (registry.py).

Loops are laid out head test / body / back jump, with the first iteration peeled where that saves
filling carried tiles or folds a constant start; a carried value stays affine while the yields keep
its coefficients, else the loop is lowered again with it materialised (checkpoint / rollback).
"""
from __future__ import annotations

from . import dtypes, registry, splits
from .errors import CarryRollback
from .mir import Label
from .ops import storage_of_type
from .ops_tensor import has_effects
from .ttir import walk
from .values import Affine, Const, Tile, splat_const

HANDLERS, handles = registry.table()


@handles("scf.for")
def lower_for(L, op):
    """scf.for. Bounds that differ per lane (inside a map_elementwise function lowered on whole tiles)
    are refused, so that the function is lowered element by element instead. A loop whose optimistic
    affine carry does not hold is lowered again with that carry materialised."""
    for v in op.operands[:3]:
        b = L.val(v)
        if isinstance(b, Tile) or (isinstance(b, Affine) and not b.is_splat):
            raise L.error("loop bounds that differ per element")
    while True:
        mark = L.mf.checkpoint()
        try:
            return _lower_for_once(L, op)
        except Exception as e:
            if not isinstance(e, CarryRollback) or e.loop_op is not op:
                raise
            L.mf.rollback(mark)
            L.materialize_carry.add((id(op), e.arg_index))


def _lower_for_once(L, op):
    lb, ub, step = (L.val(v) for v in op.operands[:3])
    inits = [L.val(v) for v in op.operands[3:]]
    body = op.regions[0].blocks[0]
    iv_t = dtypes.storage(body.args[0].type)
    iv = splits.with_facts(L.new_scalar(iv_t), splits.loop_iv(lb, ub, step))
    carried = []
    for k, (v, arg) in enumerate(zip(inits, body.args[1:])):
        keep = (id(op), k) not in L.materialize_carry
        st = L.storage_for(v, tuple(arg.type.shape) if arg.type.kind == "tensor" else (), dtypes.storage(arg.type), keep)
        carried.append(st)
    head, end, zero_trips = Label(), Label(), Label()
    peel = _peel_first_iteration(op, lb, inits, carried)
    if peel:
        # The first iteration reads the constant inits as broadcast operands (`acc = 0 + x` is an add of
        # a broadcast zero), so accumulators are not filled first; only a loop that runs no iteration
        # fills them (after the loop, at zero_trips). Same operations on the same values: same bits.
        # A constant lower bound is the first iteration's index as a constant, so the index arithmetic
        # on it folds (`X + off` is X when off is 0) and the register is set only for the loop after it.
        first = Const(dtypes.wrap(lb.value, iv_t), iv_t) if isinstance(lb, Const) else iv
        if first is iv:
            L.store_into(iv, lb)
        cond = L.elementwise("cmpi", iv_t, [first, ub], out_dtype="i1", flags={"pred": "slt"})
        L.emit("brz", "i1", a=cond, b=zero_trips)
        _store_yields(L, op, carried, L.inline_region(op.regions[0], [first] + inits))
        if isinstance(first, Const) and isinstance(step, Const):
            L.store_into(iv, Const(dtypes.fold("add", first.value, step.value, iv_t), iv_t))
        else:
            L.elementwise("add", iv_t, [first, step], out=iv)
    else:
        L.store_into(iv, lb)
        for st, v in zip(carried, inits):
            L.store_into(st, v)
    L.place(head)
    head_index = L.mf.here()
    cond = L.elementwise("cmpi", iv_t, [iv, ub], out_dtype="i1", flags={"pred": "slt"})
    L.emit("brz", "i1", a=cond, b=end)
    _store_yields(L, op, carried, L.inline_region(op.regions[0], [iv] + carried))
    L.elementwise("add", iv_t, [iv, step], out=iv)
    L.emit("jmp", a=head)
    L.mf.add_loop(head_index)
    if peel:
        L.place(zero_trips)
        for st, v in zip(carried, inits):
            L.store_into(st, v)
    L.place(end)
    return carried


PEEL_MAX_OPS = 64  # a loop body of up to this many ops is lowered twice for a constant lower bound


def _peel_first_iteration(op, lb, inits, carried) -> bool:
    """Whether to lower the first iteration on its own, in a loop without inner loops (so that no loop
    body is lowered more than twice) and without a dot (whose K loop is long: what the peel saves once
    per program is nothing beside it): when it saves filling a carried tile with a constant, or when
    a constant lower bound folds the first iteration's index arithmetic in a short body (a loop over
    `range(0, N, BLOCK)` often runs once: N == BLOCK)."""
    body = list(walk(op.regions[0]))
    if any(o.name in ("scf.for", "scf.while", "tt.dot", "tt.dot_scaled") for o in body):
        return False
    if any(isinstance(st, Tile) and splat_const(v) is not None for st, v in zip(carried, inits)):
        return True
    return isinstance(lb, Const) and len(body) <= PEEL_MAX_OPS


def _store_yields(L, op, carried, yielded):
    """End of an iteration: the yielded values become the carried ones."""
    L.set_loc(op.loc)
    for k, (st, y) in enumerate(zip(carried, yielded)):
        if isinstance(st, Affine) and not L.affine_compatible(st, y):
            raise CarryRollback(op, k)
    carried_bufs = {id(st.buf) for st in carried if isinstance(st, Tile)}
    yielded = list(yielded)
    for k, (st, y) in enumerate(zip(carried, yielded)):
        # `acc = tl.dot(a, b, acc)`: the dot accumulates into the carried tile, no copy per iteration.
        # Not when the yield copies read st's old value or y elsewhere (`a, b = b, a + b`; `b = a`).
        if (isinstance(y, Tile) and isinstance(st, Tile) and id(y.buf) not in carried_bufs
                and not any(j != k and (_reads_buf(v, st.buf) or _reads_buf(v, y.buf)) for j, v in enumerate(yielded))
                and L.retarget(y, st)):
            yielded[k] = st
    L.parallel_store(carried, yielded)


def _reads_buf(v, buf) -> bool:
    """Whether copying v (a yielded value) reads the LX buffer buf."""
    if isinstance(v, Tile):
        return v.buf is buf
    return isinstance(v, Affine) and any(isinstance(c, Tile) and c.buf is buf for c in v.coefs)


@handles("scf.if")
def lower_if(L, op):
    """scf.if; with a per-lane (tile) condition, which happens inside a map_elementwise function
    lowered on whole tiles, both branches run and the results are selected lane by lane."""
    c = L.val(op.operands[0])
    if isinstance(c, Tile) or (isinstance(c, Affine) and not c.is_splat):
        return _lower_if_per_lane(L, op, c)
    return _lower_if_scalar(L, op)


def _lower_if_per_lane(L, op, c):
    if has_effects(op):
        raise L.error("side effects under a per-element condition")
    then_vals = L.inline_region(op.regions[0], [])
    else_vals = L.inline_region(op.regions[1], []) if len(op.regions) > 1 and op.regions[1].blocks else []
    L.cur_op = op
    L.set_loc(op.loc)
    return [L.elementwise("select", dtypes.storage(r.type), [c, a, b])
            for r, a, b in zip(op.results, then_vals, else_vals)]


def _lower_if_scalar(L, op):
    cond = L.scalar(L.val(op.operands[0]))
    results = [storage_of_type(L, r.type) for r in op.results]
    else_, end = Label(), Label()
    L.emit("brz", "i1", a=cond, b=else_)
    vals = L.inline_region(op.regions[0], [])
    L.parallel_store(results, vals)
    L.emit("jmp", a=end)
    L.place(else_)
    if len(op.regions) > 1 and op.regions[1].blocks:
        vals = L.inline_region(op.regions[1], [])
        L.parallel_store(results, vals)
    L.place(end)
    return results


@handles("scf.while")
def lower_while(L, op):
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    inits = [L.val(v) for v in op.operands]
    carried = [storage_of_type(L, a.type) for a in before.args]
    for st, v in zip(carried, inits):
        L.store_into(st, v)
    head, end = Label(), Label()
    L.place(head)
    head_index = L.mf.here()
    for a, v in zip(before.args, carried):
        L.values[a] = v
    vals, term = L.lower_block(before)
    cond, passed = L.scalar(vals[0]), vals[1:]
    results = [storage_of_type(L, a.type) for a in after.args]
    L.parallel_store(results, passed)
    L.emit("brz", "i1", a=cond, b=end)
    yielded = L.inline_region(op.regions[1], results)
    L.parallel_store(carried, yielded)
    L.emit("jmp", a=head)
    L.mf.add_loop(head_index)
    L.place(end)
    return results
