"""Dead tile arithmetic: instructions whose result tile nothing reads.

The index analysis computes offset vectors as it goes (`x % 64` over the tile's range, then sign-
extended and scaled to bytes). A descriptor that knows such a vector's pattern reads its dimension as
two strided ones instead (ops.dma_desc), and the instructions that built the vector are left without
a reader. An instruction goes when the vector unit's pure operations are all it is (no memory, no
register the program reads later) and no other instruction reads its destination's buffer; an
in-place update (`rems x0, x0, 64`) does not keep its own buffer alive. Removing one may leave its
sources unread, so this repeats until nothing more goes.
"""
from __future__ import annotations

from .. import isa
from .invariants import PURE, dst_field
from .values import Tile

REMOVABLE = PURE | {"iota", "const", "tcopy", "red"}


def _tiles_read(lowering, insn):
    """The Tiles insn reads: its source operands and its descriptors' offset vectors."""
    dst = dst_field(insn.op)
    for f, kind, _ in isa.OPCODE_BY_NAME[insn.op].operands:
        v = insn.args.get(f)
        if kind == "d" and isinstance(v, int) and v != isa.NONE:
            yield from (s for s in lowering.prog.descs[v].strides if isinstance(s, Tile))
        elif f != dst and isinstance(v, Tile):
            yield v


def drop_dead_tiles(lowering) -> None:
    insns, dead = lowering.insns, set()
    while True:
        read = set()  # buffers a live instruction reads, other than an in-place update's own
        for i, insn in enumerate(insns):
            if i in dead:
                continue
            own = insn.args.get(dst_field(insn.op)) if insn.op in REMOVABLE else None
            read.update(id(t.buf) for t in _tiles_read(lowering, insn) if not (isinstance(own, Tile) and t.buf is own.buf))
        gone = {i for i, insn in enumerate(insns) if i not in dead and insn.op in REMOVABLE
                and isinstance(insn.args.get(dst_field(insn.op)), Tile)
                and id(insn.args[dst_field(insn.op)].buf) not in read}
        if not gone:
            break
        dead |= gone
    if dead:
        lowering.rewrite({}, dead=frozenset(dead))
