"""LX allocation by liveness.

A buffer lives from its first to its last use (instruction indices); a buffer used inside a loop
but first written before it lives to the loop's end, since the next iteration reads it again.
Buffers are then placed first-fit in order of first use, except that an elementwise result may take
the place of a same-sized source that dies at its instruction (computed in place). A kernel whose
live tiles need more than the LX budget is a compile error that lists the biggest tiles live at the
worst point: the user's fix is smaller blocks, which beats a spill that would silently multiply DMA
traffic.
"""
from __future__ import annotations

from .errors import LXOverflowError

ALIGN = 64


def live_ranges(buffers, loops):
    ranges = {}
    for b in buffers:
        if b.uses:
            ranges[id(b)] = [min(b.uses), max(b.uses)]
    changed = True
    while changed:
        changed = False
        for head, tail in loops:
            for b in buffers:
                r = ranges.get(id(b))
                if r is None or r[0] >= head or r[1] >= tail:
                    continue
                if any(head <= u <= tail for u in b.uses) or r[1] >= head:
                    r[1] = tail
                    changed = True
    return ranges


def allocate(buffers, loops, budget: int, kernel: str, describe, in_place=frozenset()) -> tuple[int, list]:
    """Give every used buffer an LX offset; return the LX bytes the kernel needs and its occupancy
    profile (see occupancy). `in_place`: the instruction indices whose result may take the place of a
    same-sized source that dies there."""
    ranges = live_ranges(buffers, loops)
    live = []  # (end, offset, size, buffer)
    top = 0
    for b in sorted((b for b in buffers if id(b) in ranges), key=lambda b: ranges[id(b)][0]):
        start, end = ranges[id(b)]
        live = [x for x in live if x[0] >= start]
        # An elementwise result over a source it replaces element for element (a buffer whose last use
        # is this instruction is one of its sources) is computed in place: a tile fewer in LX, and a
        # pass that stays in the cache lines it read.
        dying = next((x for x in live if x[0] == start and x[2] == b.nbytes), None) if start in in_place else None
        if dying:
            live.remove(dying)
            offset = dying[1]
        else:
            offset = _first_fit(live, b.nbytes)
        b.offset = offset
        live.append((end, offset, b.nbytes, b))
        top = max(top, offset + b.nbytes)
        if top > budget:
            _overflow(live, start, budget, kernel, describe)
    return top, occupancy([(ranges[id(b)][0], ranges[id(b)][1], b.offset, b.nbytes) for b in buffers
                           if id(b) in ranges])


def occupancy(placed) -> list:
    """The LX bytes held by live tiles, as [instruction index, bytes] at each index where it changes.
    placed: (first use, last use, offset, size) per buffer. A result computed in place shares its
    source's bytes at the instruction where one dies and the other is born: counted once."""
    changes: dict = {}
    for start, end, off, size in placed:
        changes.setdefault(start, []).append((off, size, +1))
        changes.setdefault(end + 1, []).append((off, size, -1))
    held: dict = {}  # offset -> sizes of the live tiles placed there
    out, total = [], 0
    for at in sorted(changes):
        for off, size, sign in sorted(changes[at], key=lambda c: c[2]):  # deaths first
            before = max(held.get(off) or [0])
            sizes = held.setdefault(off, [])
            sizes.append(size) if sign > 0 else sizes.remove(size)
            total += max(sizes or [0]) - before
        if not out or out[-1][1] != total:
            out.append([at, total])
    return out


def _first_fit(live, nbytes: int) -> int:
    """The lowest aligned offset where nbytes fit between the live buffers."""
    offset = 0
    for _, off, size, _ in sorted(live, key=lambda x: x[1]):
        if offset + nbytes <= off:
            break
        offset = max(offset, (off + size + ALIGN - 1) // ALIGN * ALIGN)
    return offset


def _overflow(live, at, budget, kernel, describe):
    total = sum(x[2] for x in live)
    biggest = sorted(live, key=lambda x: -x[2])[:6]
    lines = "\n".join(f"    {x[2]:>9} bytes  {x[3].what}" for x in biggest)
    raise LXOverflowError(
        f"kernel {kernel}: the tiles live at {describe(at)} need {total} bytes of LX, more than the "
        f"{budget} bytes a Spyre core has for tiles.\n  Largest live tiles:\n{lines}\n"
        f"  Use smaller block sizes (BLOCK_* constexprs) so the tiles fit.", required=total, limit=budget)
