"""Hoist launch invariants: scalar arithmetic on the kernel's arguments alone.

Every program of a launch gets the same arguments, so `N` sign-extended to i64, `N - 1` or `1.0 / N`
has the same value in all of them. Lowered where the kernel uses them, such instructions run in every
program, often once per loop (layer norm's three loops each extend `N` for their masks). Moved to the
start of the program, right after the constants, they form the run of register-only instructions the
runtime executes once per core and launch (runtime/interp.c, launch_invariant) instead of per program.

An instruction moves when it is elementwise on one element of scalar registers only, every register it
reads is an argument, a constant or the result of a moved instruction, and its own result register is
written by nothing else. Elementwise instructions cannot fault, so running one that a branch would
have skipped changes nothing but the register it alone writes.
"""
from __future__ import annotations

from .. import isa
from .values import Scalar

# register-to-register operations with no side effects (red, ld, pid, ... are not)
PURE = (isa.VIEW_OPS - {"red"}) | {"copy"}


def dst_field(op: str):
    fields = isa.OPCODE_BY_NAME[op].operands
    return fields[0][0] if fields and fields[0][2] == "dst" else None


def source_fields(op: str):
    return [f for f, kind, role in isa.OPCODE_BY_NAME[op].operands if kind in ("v", "v?", "s") and role != "dst"]


def hoist_launch_invariants(mf):
    """Move the launch invariants to the start of mf.insns; mf.n_invariant counts them."""
    insns = mf.insns
    writes = {}
    for insn in mf.prologue + insns:
        d = dst_field(insn.op)
        v = insn.args.get(d) if d else None
        if isinstance(v, Scalar):
            writes[v.slot] = writes.get(v.slot, 0) + 1
    arg_slots = mf.arg_slots
    invariant = {s for s in arg_slots if s not in writes}
    invariant |= {s for s in (insn.args[dst_field(insn.op)].slot for insn in mf.prologue) if writes.get(s) == 1}
    moved = []
    for i, insn in enumerate(insns):
        if insn.op not in PURE or insn.args.get("n") != 1:
            continue
        dst = insn.args.get(dst_field(insn.op))
        if not isinstance(dst, Scalar) or writes.get(dst.slot) != 1 or dst.slot in arg_slots:
            continue  # moved earlier, a write to an argument's register would change what reads it first
        srcs = [insn.args[f] for f in source_fields(insn.op) if f in insn.args and insn.args[f] != isa.NONE]
        if all(isinstance(s, Scalar) and s.slot in invariant for s in srcs):
            invariant.add(dst.slot)
            moved.append(i)
    if moved:
        mf.rewrite({0: [insns[i] for i in moved]}, dead=frozenset(moved))
    mf.n_invariant = len(moved)
    return mf
