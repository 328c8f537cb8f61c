"""Multiply-add fusion: `mul` then `add` of its result becomes one `fma` (one rounding, one pass).

Triton's `enable_fp_fusion` option (on by default, as on GPUs, where LLVM contracts a * b + c into an
fma) allows it; with the option off every product and sum round separately. A product qualifies when
the add is its only reader, in the same basic block, and nothing in between rewrites the product's
operands. The mul's register or tile is then dropped: the fma takes its place at the add.
"""
from __future__ import annotations

from .. import isa
from .values import Scalar, Tile
from .views import block_ids

FLOATS = {"f16", "bf16", "f32", "f64"}


def _same_storage(u, v) -> bool:
    if isinstance(u, Tile) and isinstance(v, Tile):
        return u.buf is v.buf
    return isinstance(u, Scalar) and isinstance(v, Scalar) and u.slot == v.slot


def _whole(v, ref) -> bool:
    return isinstance(v, Tile) and isinstance(ref, Tile) and v.buf is ref.buf and v.off == ref.off and v.numel == ref.numel


def fuse_multiply_add(lowering) -> None:
    insns = lowering.insns
    blocks = block_ids(insns)
    dead = set()
    for m, mul in enumerate(insns):
        if mul.op != "mul" or mul.t not in FLOATS:
            continue
        prod = mul.args["a"]
        if not isinstance(prod, Tile) or len(set(prod.buf.uses)) != 2 or min(prod.buf.uses) != m:
            continue
        a = max(prod.buf.uses)
        add = insns[a]
        if add.op != "add" or add.t != mul.t or blocks[a] != blocks[m] or add.args.get("n") != mul.args.get("n"):
            continue
        if _whole(add.args.get("b"), prod) and not add.flags.get("bc1") and not _refs(add.args.get("c"), prod):
            other, bc_other = add.args["c"], add.flags.get("bc2", 0)
        elif _whole(add.args.get("c"), prod) and not add.flags.get("bc2") and not _refs(add.args.get("b"), prod):
            other, bc_other = add.args["b"], add.flags.get("bc1", 0)
        else:
            continue
        srcs = (mul.args["b"], mul.args["c"])
        if any(_same_storage(insns[k].args.get("a"), s) for k in range(m + 1, a) for s in srcs):
            continue  # an operand of the product changes before the add
        flags = {f"bc{i}": 1 for i, f in ((1, "bc1"), (2, "bc2")) if mul.flags.get(f)}
        if bc_other:
            flags["bc3"] = 1
        for s in srcs:
            if isinstance(s, Tile):
                s.buf.uses.append(a)
        insns[a] = isa.Insn("fma", mul.t, "i1", {"a": add.args["a"], "b": srcs[0], "c": srcs[1], "d": other,
                                                  "n": add.args["n"]}, flags, add.loc)
        dead.add(m)
    if dead:
        lowering.rewrite({}, dead)


def _refs(v, prod) -> bool:
    return isinstance(v, Tile) and v.buf is prod.buf
