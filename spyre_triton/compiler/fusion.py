"""Elementwise fusion: two instructions become one pass over the tiles.

- Multiply-add: `mul` then `add` of its result becomes one `fma` (one rounding). Triton's
  `enable_fp_fusion` option (on by default, as on GPUs, where LLVM contracts a * b + c into an fma)
  allows it; with the option off every product and sum round separately.
- Binary chains: an `add`, `sub` or `mul` whose result only the next such instruction reads, as its
  first operand, becomes one `binchain` (`(x - mean) * rstd`). Each operation still rounds, so the bits
  are those of the two instructions, whatever the options; what goes is the tile between them (a
  store and a load per element, and the LX it took).

A pair qualifies when the second instruction is the first one's only reader, in the same basic block,
and nothing in between rewrites the first one's operands. The first instruction's register or tile is
then dropped: the fused instruction takes its place at the second.
"""
from __future__ import annotations

from .. import isa
from .values import Scalar, Tile
from .views import block_ids

FLOATS = {"f16", "bf16", "f32", "f64"}
CHAIN_OPS = {"add", "sub", "mul"}
CHAIN_TYPES = {"f32", "f64"}  # the runtime's binchain loops (halves round through f32 per operation)


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


def _only_reader(insns, blocks, m):
    """The index of the one instruction after m that touches m's result tile, in m's basic block; None
    when the result is a register, has other readers, or the reader is in another block."""
    res = insns[m].args["a"]
    if not isinstance(res, Tile) or len(set(res.buf.uses)) != 2 or min(res.buf.uses) != m:
        return None
    k = max(res.buf.uses)
    return k if blocks[k] == blocks[m] else None


def fuse_binary_chains(lowering) -> None:
    insns = lowering.insns
    blocks = block_ids(insns)
    dead = set()
    for m, first in enumerate(insns):
        if first.op not in CHAIN_OPS or first.t not in CHAIN_TYPES or m in dead:
            continue
        k = _only_reader(insns, blocks, m)
        if k is None:
            continue
        second, prod = insns[k], first.args["a"]
        if second.op not in CHAIN_OPS or second.t != first.t or second.args.get("n") != first.args.get("n"):
            continue
        if not _whole(second.args.get("b"), prod) or second.flags.get("bc1") or _refs(second.args.get("c"), prod):
            continue  # the intermediate must be the second op's first operand, read whole (NaN order)
        srcs = (first.args["b"], first.args["c"])
        if any(_same_storage(insns[j].args.get("a"), s) for j in range(m + 1, k) for s in srcs):
            continue  # an operand of the first op changes before the second
        flags = {f: 1 for f in ("bc1", "bc2") if first.flags.get(f)}
        if second.flags.get("bc2"):
            flags["bc3"] = 1
        flags["ops"] = f"{first.op}_{second.op}"
        for s in srcs:
            if isinstance(s, Tile):
                s.buf.uses.append(k)
        insns[k] = isa.Insn("binchain", first.t, "i1", {"a": second.args["a"], "b": srcs[0], "c": srcs[1],
                                                        "d": second.args["c"], "n": second.args["n"]}, flags, second.loc)
        dead.add(m)
    if dead:
        lowering.rewrite({}, dead)
