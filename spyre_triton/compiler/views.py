"""Copy elision: view registers for tiles that are only loaded and read, or only computed and stored.

A memory-bound kernel (`out = x + y`) moves every byte through LX: an `ld` copies device memory into a
tile, the vector unit reads it, and a `st` copies the result back. On the simulated device those two
copies cost as much as the arithmetic. ISA v4's view registers (docs/isa.md) let the interpreter skip
them where it is safe, without changing what a program means:

- an `ld` whose tile is only read, by elementwise instructions, reductions or a `st`, gets a view
  register; its readers read through it. At run time the ld moves nothing when its box is one
  contiguous in-bounds run, and its readers then read device memory directly;
- an `ld` whose tile only dots (a matmul's A or B tile) and reductions of its rows read gets a view
  register with the `rows` flag: when the box is rows of contiguous elements, unclipped, the dot packs
  its operand and the red reduces straight from device memory at the row stride the ld found (a K tail
  or an edge tile is copied as before);
- a `st` whose tile is written by one elementwise instruction just before gets a `view` instruction
  ahead of that producer, which then writes device memory directly when the store's box is one run.

Reading device memory later than the ld, or writing it earlier than the st, is only allowed when no
instruction in between touches device memory, all of it within one basic block. This pass runs on the
lowering's instruction list before LX allocation; the tiles keep their LX space as the fallback.
"""
from __future__ import annotations

from math import prod

from .. import isa
from .values import Scalar, Tile

READS_MEMORY = {"ld", "gather", "atom", "acas"}
WRITES_MEMORY = {"st", "scatter", "atom", "acas"}
ENDS_BLOCK = {"jmp", "brz", "brnz", "halt"}
SOURCE_FIELDS = ("b", "c", "d")


def elide_copies(mf):
    insns = mf.insns
    blocks = block_ids(insns)
    views = _Views()
    for i, insn in enumerate(insns):
        if insn.op == "ld":
            _view_load(mf, i, blocks, views)
    inserts, moved = {}, set()
    for j, insn in enumerate(insns):
        if insn.op == "st":
            found = _view_store(mf, j, blocks, views, moved)
            if found is not None:
                p, new, hoisted = found
                inserts[p] = new
                moved |= hoisted
    if inserts:
        mf.rewrite(inserts, moved)
    return mf


class _Views:
    def __init__(self):
        self.used = 0

    def new(self):
        if self.used >= isa.MAX_VIEWS:
            return None
        self.used += 1
        return self.used - 1


def block_ids(insns):
    """The basic block of each instruction: blocks start at branch targets and after branches."""
    starts = {0}
    for i, insn in enumerate(insns):
        for f, kind, _ in isa.OPCODE_BY_NAME[insn.op].operands:
            if kind == "l":
                starts.add(insn.args[f].index)
        if insn.op in ENDS_BLOCK:
            starts.add(i + 1)
    ids, block = [], -1
    for i in range(len(insns)):
        block += i in starts
        ids.append(block)
    return ids


def _whole(v, tile: Tile) -> bool:
    return isinstance(v, Tile) and v.buf is tile.buf and v.off == 0


def _desc_may_be_one_run(desc: isa.Descriptor, es: int) -> bool:
    """False when the descriptor can never be one contiguous run (the runtime decides the rest)."""
    dims = [(n, s) for n, s in zip(desc.shape, desc.strides) if n != 1]
    if any(isinstance(s, Tile) or (isinstance(s, tuple) and s[0] == "v") for _, s in dims):
        return False  # an offset vector (a Tile until finish() places it)
    expect = es
    for n, s in reversed(dims):
        if isinstance(s, int) and s != expect:
            return False
        expect *= n
    return True


def _desc_may_be_rows(desc: isa.Descriptor, es: int) -> bool:
    """False when a 2-D descriptor's rows can never be contiguous (the runtime decides the rest)."""
    if len(desc.shape) != 2:
        return False
    n, s = desc.shape[1], desc.strides[1]
    return n == 1 or not isinstance(s, int) or s == es


def _red_rows(red, shape) -> bool:
    """A red whose source is this 2-D tile as rows it can read at a stride: [len, inner] (outer 1) or
    [outer, len] (inner 1)."""
    outer, n, inner = red.args["c"], red.args["d"], red.args["e"]
    return len(shape) == 2 and ((outer == 1 and [n, inner] == list(shape)) or (inner == 1 and [outer, n] == list(shape)))


def _dot_operand_fields(dot, shape) -> tuple:
    """The fields of an unbatched dot that may read a tile of this shape through a view register: its a
    operand (field b, [M, K]) and its b operand (field c, [K, N], or [N, K] with bt)."""
    if dot.flags.get("batch", 0) > 1:
        return ()
    m, n, k = dot.args["e"] >> 16, dot.args["e"] & 0xFFFF, dot.args["n"]
    b_shape = [n, k] if dot.flags.get("bt") else [k, n]
    return tuple(f for f, want in (("b", [m, k]), ("c", b_shape)) if list(shape) == want)


def _view_load(mf, i, blocks, views) -> None:
    ld = mf[i]
    tile, desc = ld.args["a"], mf.descs[ld.args["c"]]
    es = isa.DTYPE_BY_NAME[ld.t].nbytes
    if ld.args.get("d", isa.NONE) != isa.NONE or not isinstance(tile, Tile) or tile.off != 0:
        return
    if tile.numel != prod(desc.shape):
        return
    readers = [u for u in tile.buf.uses if u != i]
    if not readers or min(tile.buf.uses) != i or any(blocks[u] != blocks[i] for u in readers):
        return
    # read only by dots and by reds of its rows: they take a row stride, so the view may be strided rows
    rows = all(mf[u].op == "dot" or (mf[u].op == "red" and _red_rows(mf[u], desc.shape))
               for u in readers)
    if not (_desc_may_be_rows(desc, es) if rows else _desc_may_be_one_run(desc, es)):
        return
    fields = {}
    for u in set(readers):
        r = mf[u]
        srcs = (("c",) if r.op == "st" else _dot_operand_fields(r, desc.shape) if r.op == "dot"
                else SOURCE_FIELDS if r.op in isa.VIEW_OPS else ())
        if r.op == "st" and r.args.get("e", isa.NONE) != isa.NONE:
            return
        fs = [f for f in srcs if _whole(r.args.get(f), tile)]
        refs = [f for f, v in r.args.items() if isinstance(v, Tile) and v.buf is tile.buf]
        if not fs or len(fs) != len(refs):  # read elsewhere too: as a destination, an offset vector, ...
            return
        fields[u] = fs
    end = max(readers)
    if any(mf[k].op in WRITES_MEMORY for k in range(i + 1, end)):
        return
    v = views.new()
    if v is None:
        return
    ld.args["n"] = v
    if rows:
        ld.flags["rows"] = 1
    for u, fs in fields.items():
        for f in fs:
            mf[u].args[f] = v
            mf[u].flags[isa.VIEW[f].name] = 1


def _view_store(mf, j, blocks, views, moved):
    st = mf[j]
    tile, desc = st.args["c"], mf.descs[st.args["b"]]
    es = isa.DTYPE_BY_NAME[st.t].nbytes
    if (st.args.get("d", isa.NONE) != isa.NONE or st.flags.get("bc_src") or st.flags.get("vc")
            or not isinstance(tile, Tile) or tile.off != 0):
        return None
    if tile.numel != prod(desc.shape) or not _desc_may_be_one_run(desc, es):
        return None
    uses = sorted(set(tile.buf.uses))
    if len(uses) != 2 or uses[1] != j or blocks[uses[0]] != blocks[j]:
        return None
    p = uses[0]
    if any(p <= k < j for k in moved):  # another store's address arithmetic moved out of this stretch
        return None
    prod_insn = mf[p]
    if prod_insn.op not in isa.VIEW_OPS or prod_insn.op == "red" or not _whole(prod_insn.args.get("a"), tile):
        return None
    if prod_insn.args.get("n") != tile.numel or any(_whole(prod_insn.args.get(f), tile) for f in SOURCE_FIELDS):
        return None
    # nothing between producer and store may touch device memory (the result lands there early) ...
    for k in range(p + 1, j):
        mid = mf[k]
        if mid.op in READS_MEMORY | WRITES_MEMORY or any(mid.flags.get(fl.name) for fl in isa.VIEW.values()):
            return None
    # ... or change where the store goes: the scalar arithmetic computing its address moves ahead
    hoist = _address_arithmetic(mf, p, j, _desc_regs(mf, st) | _slots(st.args["a"]))
    if hoist is None:
        return None
    v = views.new()
    if v is None:
        return None
    view = isa.Insn("view", st.t, "i1", {"a": v, "b": st.args["a"], "c": st.args["b"], "d": tile},
                    {"arg": st.flags["arg"]} if st.flags.get("arg") else {}, prod_insn.loc)
    prod_insn.args["a"] = v
    prod_insn.flags["va"] = 1
    st.args["e"] = v
    return p, [mf[k] for k in hoist] + [view], set(hoist)


# -- scalar registers -----------------------------------------------------------------------------
SCALAR_OPS = {"add", "sub", "mul", "cvt", "copy", "const", "and", "or", "xor", "shl", "shrs", "shru", "maxs", "mins",
              "divs", "rems", "cmpi", "select"}


def _slots(v) -> set:
    return {v.slot} if isinstance(v, Scalar) else set()


def _desc_regs(mf, insn) -> set:
    regs = set()
    for f, kind, _ in isa.OPCODE_BY_NAME[insn.op].operands:
        if kind == "d" and f in insn.args:
            desc = mf.descs[insn.args[f]]
            for s in tuple(desc.strides) + tuple(desc.limits):
                if isinstance(s, tuple) and s[0] == "s":
                    regs.add(s[1] // isa.SREG_BYTES)
    return regs


def _written(insn) -> set:
    fields = isa.OPCODE_BY_NAME[insn.op].operands
    return _slots(insn.args.get("a")) if fields and fields[0][2] == "dst" else set()


def _read(mf, insn) -> set:
    regs = _desc_regs(mf, insn)
    for f, v in insn.args.items():
        if isinstance(v, Scalar) and not (f == "a" and _written(insn)):
            regs.add(v.slot)
    return regs


def _address_arithmetic(mf, p, j, needed):
    """The instructions in (p, j) computing the registers in `needed`, if all can move ahead of p (as a
    group, in order) without changing any value: scalar arithmetic only, its inputs not written and its
    output not read or written by what stays in [p, k). Returns their indices, or None."""
    hoist = []
    for k in range(j - 1, p, -1):
        insn = mf[k]
        out = _written(insn) & needed
        if not out:
            continue
        if insn.op not in SCALAR_OPS or insn.args.get("n") != 1 or any(isinstance(v, Tile) for v in insn.args.values()):
            return None
        hoist.append(k)
        needed = (needed - out) | _read(mf, insn)
    if _written(mf[p]) & needed:
        return None
    hoist.reverse()
    stays = [k for k in range(p, j) if k not in hoist]
    for k in hoist:
        ins, out = mf[k], _written(mf[k])
        for q in stays:
            if q >= k:
                break
            other = mf[q]
            if _written(other) & (_read(mf, ins) | out) or _read(mf, other) & out:
                return None
    return hoist
