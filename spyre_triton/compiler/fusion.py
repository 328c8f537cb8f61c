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


def _fuse_pairs(mf, first_ok, pair):
    """Replace each pair of elementwise instructions (first, second), where second is first's only reader
    and first's operands stay unchanged until it, by one instruction at second's place: dst = second's,
    (b, c) = first's operands with their broadcast bits, d = second's other operand. first_ok(insn) picks
    the candidates; pair(first, second, result) gives (opcode, other operand, its broadcast bit, extra
    flags) for the fused instruction, or None when the two do not fuse."""
    insns = mf.insns
    blocks = block_ids(insns)
    dead = set()
    for m, first in enumerate(insns):
        if not first_ok(first):
            continue
        k = _only_reader(insns, blocks, m)
        if k is None:
            continue
        second = insns[k]
        if second.t != first.t or second.args.get("n") != first.args.get("n"):
            continue
        fused = pair(first, second, first.args["a"])
        if fused is None:
            continue
        op, other, bc_other, extra = fused
        srcs = (first.args["b"], first.args["c"])
        if any(_same_storage(insns[j].args.get("a"), s) for j in range(m + 1, k) for s in srcs):
            continue  # an operand of the first instruction changes before the second
        flags = {f: 1 for f in ("bc1", "bc2") if first.flags.get(f)}
        if bc_other:
            flags["bc3"] = 1
        flags.update(extra)
        for s in srcs:
            if isinstance(s, Tile):
                s.buf.uses.append(k)
        insns[k] = isa.Insn(op, first.t, "i1", {"a": second.args["a"], "b": srcs[0], "c": srcs[1], "d": other,
                                                "n": second.args["n"]}, flags, second.loc)
        dead.add(m)
    if dead:
        mf.rewrite({}, dead)
    return mf


def _mul_add(mul, add, prod):
    if add.op != "add":
        return None
    if _whole(add.args.get("b"), prod) and not add.flags.get("bc1") and not _refs(add.args.get("c"), prod):
        return "fma", add.args["c"], add.flags.get("bc2", 0), {}
    if _whole(add.args.get("c"), prod) and not add.flags.get("bc2") and not _refs(add.args.get("b"), prod):
        return "fma", add.args["b"], add.flags.get("bc1", 0), {}
    return None


def fuse_multiply_add(mf):
    return _fuse_pairs(mf, lambda i: i.op == "mul" and i.t in FLOATS, _mul_add)


def _binary_chain(first, second, result):
    if second.op not in CHAIN_OPS:
        return None
    if not _whole(second.args.get("b"), result) or second.flags.get("bc1") or _refs(second.args.get("c"), result):
        return None  # the intermediate must be the second op's first operand, read whole (NaN order)
    return "binchain", second.args["c"], second.flags.get("bc2", 0), {"ops": f"{first.op}_{second.op}"}


def fuse_binary_chains(mf):
    return _fuse_pairs(mf, lambda i: i.op in CHAIN_OPS and i.t in CHAIN_TYPES, _binary_chain)
