"""The machine IR: what lowering emits and the passes after it rewrite, up to register and LX allocation.

A `MachineFunction` owns
- `insns`: `isa.Insn`s whose operands are still `Scalar` (a virtual register), `Tile` (a view into a
  `Buffer`, placed in LX later) and `Label` (a branch target) objects where the binary has offsets and
  instruction indices;
- `prologue`: the constants put in registers, run before `insns`;
- `loops`: (head, tail) instruction indices of every backward branch, for liveness;
- `buffers`: the LX buffers the tiles view, each with the indices of the instructions that use it;
- `descs`: the descriptor table (the program's), whose register strides and offset vectors the
  instructions name by index;
- `cache`: what emitted instructions compute that lowering may reuse (a materialised affine value,
  scalar address arithmetic), each entry with the block depth it was computed at, forgotten when that
  block ends (`forget_deeper`).

Lowering appends through `append` (which records the tiles each instruction uses), `add_buffer`,
`add_desc`, `place` (a label at the next instruction) and `add_loop` (a backward branch just emitted);
`here()` is the index the next instruction gets and `mf[i]` instruction i.

It can mark a point (`checkpoint`) and go back to it (`rollback`): a lowering that is tried and taken
back (a loop lowered again with its carry materialised, a map_elementwise function that cannot run on
whole tiles) forgets what it emitted and what it cached, and edits it made to what came before are
undone (`record_undo`).
Passes (dead.py, fusion.py, views.py, hoist.py) take it and return it; `flatten` then puts the
prologue in front for register and LX allocation (sregs.py, lx_alloc.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import isa
from .values import Tile


class Label:
    """A branch target: the index of the instruction it points at, once placed."""

    def __init__(self):
        self.index = None


@dataclass(frozen=True)
class Mark:
    n_insns: int
    n_loops: int
    n_buffers: int
    n_descs: int
    n_undo: int
    cache: dict


class MachineFunction:
    def __init__(self, descs: list, arg_slots=()):
        self.insns = []
        self.prologue = []
        self.loops = []
        self.buffers = []
        self.descs = descs
        self.arg_slots = set(arg_slots)  # registers the launcher writes (the kernel's arguments)
        self.n_invariant = 0  # the leading instructions, after flatten, that are launch invariants
        self.cache = {}  # key -> (object kept alive, value, block depth it was computed at)
        self._undo = []

    # -- emitting -----------------------------------------------------------------------------
    def __getitem__(self, i: int) -> "isa.Insn":
        return self.insns[i]

    def __len__(self) -> int:
        return len(self.insns)

    def here(self) -> int:
        """The index the next instruction appended gets."""
        return len(self.insns)

    def append(self, insn: "isa.Insn") -> "isa.Insn":
        """Add an instruction; each tile it names, and each offset vector of a descriptor it names, is
        used by it."""
        i = len(self.insns)
        for v in insn.args.values():
            if isinstance(v, Tile):
                v.buf.uses.append(i)
        for f, kind, _ in isa.OPCODE_BY_NAME[insn.op].operands:
            if kind == "d" and f in insn.args:
                for s in self.descs[insn.args[f]].strides:
                    if isinstance(s, Tile):
                        s.buf.uses.append(i)
        self.insns.append(insn)
        return insn

    def add_buffer(self, buf):
        self.buffers.append(buf)
        return buf

    def add_desc(self, desc: "isa.Descriptor") -> int:
        """Add a descriptor; its index, which instructions name."""
        self.descs.append(desc)
        return len(self.descs) - 1

    def place(self, label: Label) -> None:
        """Point `label` at the next instruction appended."""
        label.index = len(self.insns)

    def add_loop(self, head: int) -> None:
        """The instruction just appended branches back to instruction `head`: a loop, for liveness."""
        self.loops.append((head, len(self.insns) - 1))

    # -- values computed once -----------------------------------------------------------------
    def recall(self, key):
        """The value cached under `key`, or None."""
        hit = self.cache.get(key)
        return None if hit is None else hit[1]

    def remember(self, key, value, depth: int, keep=None) -> None:
        """Cache `value` under `key` until the block at `depth` ends; `keep` is held so that an id()
        key stays unique while the entry lives."""
        self.cache[key] = (keep, value, depth)

    def forget_deeper(self, depth: int) -> None:
        """A block ended: forget what was computed inside it (it does not dominate what follows)."""
        self.cache = {k: e for k, e in self.cache.items() if e[2] <= depth}

    # -- trying and taking back ---------------------------------------------------------------
    def checkpoint(self) -> Mark:
        return Mark(len(self.insns), len(self.loops), len(self.buffers), len(self.descs), len(self._undo),
                    dict(self.cache))

    def record_undo(self, undo) -> None:
        """`undo()` reverses an in-place edit of something emitted before the latest checkpoint."""
        self._undo.append(undo)

    def rollback(self, mark: Mark) -> None:
        """Forget everything emitted since `mark` (instructions, loops, buffers, descriptors) and what was
        cached since (it names dropped tiles or registers set by dropped instructions), and undo, newest
        first, the edits recorded since. Registers taken since stay taken; nothing refers to them, so
        register allocation gives them no slot."""
        for undo in reversed(self._undo[mark.n_undo:]):
            undo()
        del self._undo[mark.n_undo:]
        del self.insns[mark.n_insns:]
        del self.loops[mark.n_loops:]
        del self.buffers[mark.n_buffers:]
        del self.descs[mark.n_descs:]
        self.cache = dict(mark.cache)
        for b in self.buffers:
            b.uses = [u for u in b.uses if u < mark.n_insns]

    # -- rewriting ----------------------------------------------------------------------------
    def rewrite(self, before: dict, dead=frozenset()) -> None:
        """Insert the instructions in before[i] (a list) ahead of instruction i and remove those at the
        indices in `dead` (an instruction may move: dropped at its place, inserted at another), keeping
        buffer uses, loops and labels right. A label at i points at what is inserted before i (or, if i
        went, at what follows); inserted instructions count as uses of the tiles they name."""
        at, pos, new, placed = {}, {}, [], []
        for i, insn in enumerate(self.insns):
            at[i] = len(new)
            for ins in before.get(i, ()):
                placed.append((len(new), ins))
                new.append(ins)
            pos[i] = len(new)
            if i not in dead:
                new.append(insn)
        at[len(self.insns)] = pos[len(self.insns)] = len(new)
        labels = {id(v): v for insn in self.insns for v in insn.args.values() if isinstance(v, Label)}
        for label in labels.values():
            label.index = at[label.index]
        for b in self.buffers:
            b.uses = [pos[u] for u in b.uses if u not in dead]
        for k, ins in placed:
            for v in ins.args.values():
                if isinstance(v, Tile):
                    v.buf.uses.append(k)
        self.loops = [(at[h], pos[t]) for h, t in self.loops]
        self.insns = new

    def flatten(self) -> "MachineFunction":
        """The prologue moved to the front of the instructions (uses, loops and labels shifted)."""
        shift = len(self.prologue)
        if shift:
            for b in self.buffers:
                b.uses = [u + shift for u in b.uses]
            self.loops = [(h + shift, t + shift) for h, t in self.loops]
            labels = {id(v): v for insn in self.insns for v in insn.args.values() if isinstance(v, Label)}
            for label in labels.values():
                label.index += shift
            self.insns = self.prologue + self.insns
            self.n_invariant += shift
            self.prologue = []
        return self
