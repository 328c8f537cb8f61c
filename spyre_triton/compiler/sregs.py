"""Scalar register allocation by liveness.

Lowering takes a fresh scalar register for every scalar it computes (`Lowering.new_scalar`), so a
long straight-line kernel, such as a `tl.map_elementwise` function lowered element by element,
names far more registers than a core has (`isa.SREGS_MAX`). Here each register lives from its first
to its last access (instruction indices, descriptors' register strides and bounds counted at the
instructions that use them); one that is accessed inside a loop lives across every loop it touches,
since a later iteration may read it again. Registers whose lives do not overlap share a slot.

A register whose first access reads it relies on the zeroed registers a program starts with (or is
an argument, which the launcher writes): it keeps a slot of its own for the whole program. A kernel
that still needs more slots than a core has is a compile error naming the source line where the
registers run out.
"""
from __future__ import annotations

import bisect
import heapq

from .. import isa
from .errors import CompilationError
from .values import Scalar


def _accesses(insn, descs):
    """(slot, is_write) for every scalar register the instruction reads or writes, reads first."""
    reads, writes = [], []
    for f, kind, role in isa.OPCODE_BY_NAME[insn.op].operands:
        v = insn.args.get(f)
        if isinstance(v, Scalar):
            (writes if role == "dst" else reads).append(v.slot)
        elif kind == "d" and f in insn.args:
            d = descs[v]
            for s in tuple(d.strides) + tuple(d.limits):
                if isinstance(s, tuple) and s[0] == "s":
                    reads.append(s[1] // isa.SREG_BYTES)
    return [(s, False) for s in reads] + [(s, True) for s in writes]


def _loop_spans(loops):
    """The loops merged into disjoint spans of overlapping ones, sorted: a register that touches one
    loop of a span lives across all of it (it covers that loop, which overlaps the next one...)."""
    spans = []
    for h, t in sorted(loops):
        if spans and h <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], t)
        else:
            spans.append([h, t])
    return spans


def live_ranges(insns, descs, loops, pinned):
    """slot -> [first, last] instruction index; registers in `pinned` or read before any write live
    across the whole program."""
    ranges, pinned = {}, set(pinned)
    for i, insn in enumerate(insns):
        for slot, is_write in _accesses(insn, descs):
            r = ranges.get(slot)
            if r is None:
                ranges[slot] = [i, i]
                if not is_write:
                    pinned.add(slot)
            else:
                r[1] = i
    spans = _loop_spans(loops)
    starts = [s[0] for s in spans]
    for slot, r in ranges.items():
        if slot in pinned:
            r[0], r[1] = -1, len(insns)
            continue
        k = max(bisect.bisect_right(starts, r[0]) - 1, 0)
        while k < len(spans) and spans[k][0] <= r[1]:
            h, t = spans[k]
            if t >= r[0]:  # the register touches this span
                r[0], r[1] = min(r[0], h), max(r[1], t)
            k += 1
    return ranges


def allocate(insns, descs, loops, args, pinned, kernel: str, describe) -> tuple[dict, int]:
    """A slot for every register (old slot -> new slot) and the number of slots used. The arguments'
    registers (`args`, which the launcher writes) keep their slots; those in `pinned` get slots of their
    own for the whole program."""
    ranges = live_ranges(insns, descs, loops, set(args) | set(pinned))
    mapping = {s: s for s in args}
    top = max(args, default=-1) + 1
    free = [s for s in range(top) if s not in mapping]
    heapq.heapify(free)
    active = []  # (last index, slot)
    for slot in sorted((s for s in ranges if s not in mapping), key=lambda s: (ranges[s][0], s)):
        first, last = ranges[slot]
        while active and active[0][0] < first:  # dead before this one is first written: reuse
            heapq.heappush(free, heapq.heappop(active)[1])
        if free:
            new = heapq.heappop(free)
        else:
            new, top = top, top + 1
            if top > isa.SREGS_MAX:
                raise CompilationError(
                    f"kernel {kernel}: more than the {isa.SREGS_MAX} scalar registers a Spyre core has are live "
                    f"at once\n  at {describe(max(first, 0))}\n  Use smaller blocks (a map_elementwise function "
                    f"that runs element by element takes registers for every element) or split the kernel.")
        mapping[slot] = new
        heapq.heappush(active, (last, new))
    return mapping, top


def apply(insns, descs, mapping) -> None:
    """Rename the registers in the instructions' Scalar operands and the descriptors' register strides
    and bounds (a descriptor no instruction uses keeps slot 0: nothing reads it)."""
    remap = lambda s: ("s", mapping.get(s[1] // isa.SREG_BYTES, 0) * isa.SREG_BYTES) \
        if isinstance(s, tuple) and s[0] == "s" else s
    for d in descs:
        d.strides = tuple(remap(s) for s in d.strides)
        d.limits = tuple(remap(s) for s in d.limits)
    for insn in insns:
        for k, v in insn.args.items():
            if isinstance(v, Scalar):
                insn.args[k] = Scalar(mapping[v.slot], v.dtype)
