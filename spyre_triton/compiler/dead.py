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
from .hoist import PURE, dst_field, source_fields
from .values import Tile

REMOVABLE = PURE | {"iota", "const", "tcopy", "red"}


def _tiles_read(mf, insn):
    """The Tiles insn reads: its source operands and its descriptors' offset vectors."""
    yield from (insn.args[f] for f in source_fields(insn.op) if isinstance(insn.args.get(f), Tile))
    for f, kind, _ in isa.OPCODE_BY_NAME[insn.op].operands:
        if kind == "d" and insn.args.get(f, isa.NONE) != isa.NONE:
            yield from (s for s in mf.descs[insn.args[f]].strides if isinstance(s, Tile))


def _removable_dst(insn):
    """The destination tile of a pure vector instruction, else None."""
    dst = insn.args.get(dst_field(insn.op)) if insn.op in REMOVABLE else None
    return dst if isinstance(dst, Tile) else None


def drop_dead_tiles(mf):
    insns, dead = mf.insns, set()
    while True:
        read = set()  # buffers a live instruction reads, other than an in-place update's own
        for i, insn in enumerate(insns):
            if i not in dead:
                own = _removable_dst(insn)
                read.update(id(t.buf) for t in _tiles_read(mf, insn) if own is None or t.buf is not own.buf)
        gone = {i for i, insn in enumerate(insns)
                if i not in dead and _removable_dst(insn) is not None and id(_removable_dst(insn).buf) not in read}
        if not gone:
            break
        dead |= gone
    if dead:
        mf.rewrite({}, dead=frozenset(dead))
    return mf
