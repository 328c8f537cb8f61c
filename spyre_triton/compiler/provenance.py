"""Which pointer argument of the kernel each pointer value derives from.

The runtime checks a device-memory access against the allocation of the argument its address derives
from (isa.BASE_ARG), so that `o + delta` reaching the tensor next to `o` faults instead of writing it.
This module answers "which argument" for every pointer-typed SSA value of the module, by a fixed point
over the ops: a kernel argument derives from itself; `addptr` from its pointer operand; splats,
broadcasts, reshapes, layout changes and selects from the union of their pointer operands; loop and
branch arguments from the union of everything that flows into them; a callee's arguments from every
call site. Anything else (a pointer loaded from memory, made from an integer) is unknown, and so is a
value that may derive from more than one argument: the runtime then falls back to checking the access
against any live allocation.
"""
from __future__ import annotations

from .ttir import walk

UNKNOWN = "unknown"  # the lattice's top: derives from something other than one known argument

# ops whose pointer result derives from their pointer operands (addptr: the offset is an integer)
_FORWARD = {"tt.addptr", "tt.splat", "tt.broadcast", "tt.expand_dims", "tt.reshape", "tt.trans",
            "ttg.convert_layout", "tt.join", "tt.cat", "arith.select", "tt.bitcast", "tt.advance",
            "tt.make_tensor_ptr", "tt.split"}


def _join(a, b):
    """The least upper bound: None (nothing flows in yet) below sets of argument indices, UNKNOWN above."""
    if a is None:
        return b
    if b is None:
        return a
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    return a | b


def _is_ptr(v) -> bool:
    t = v.type
    return t.is_ptr or (t.is_tensor and t.scalar.is_ptr)


class _Flow:
    def __init__(self, module):
        self.module = module
        self.facts = {}  # id(Value) -> None | frozenset of argument indices | UNKNOWN
        self.changed = False

    def get(self, v):
        return self.facts.get(id(v))

    def flow(self, dst, fact):
        if not _is_ptr(dst):
            return
        new = _join(self.facts.get(id(dst)), fact)
        if new != self.facts.get(id(dst)):
            self.facts[id(dst)] = new
            self.changed = True

    def flow_all(self, dsts, srcs):
        for d, s in zip(dsts, srcs):
            self.flow(d, self.get(s))

    def run(self):
        kernel = self.module.kernel
        for i, a in enumerate(kernel.args):
            self.flow(a, frozenset((i,)))
        self.changed = True
        while self.changed:
            self.changed = False
            for op in walk(self.module):
                self.visit(op)
        return self.facts

    def visit(self, op):
        name = op.name
        if name in _FORWARD:
            srcs = op.operands[:1] if name in ("tt.addptr", "tt.advance", "tt.make_tensor_ptr") else op.operands
            fact = None
            for s in srcs:
                if _is_ptr(s):
                    fact = _join(fact, self.get(s))
            for r in op.results:
                self.flow(r, fact)
        elif name == "scf.for":
            body = op.regions[0].blocks[0]
            self.flow_all(body.args[1:], op.operands[3:])
            self.flow_all(op.results, op.operands[3:])
        elif name == "scf.while":
            before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
            self.flow_all(before.args, op.operands)
        elif name == "scf.yield":
            self.yield_into(op)
        elif name == "scf.condition":
            loop = op.parent_op
            self.flow_all(loop.regions[1].blocks[0].args, op.operands[1:])
            self.flow_all(loop.results, op.operands[1:])
        elif name in ("cf.br", "cf.cond_br"):
            rest = op.operands[1:] if name == "cf.cond_br" else op.operands
            for blk in op.successors:
                self.flow_all(blk.args, rest[:len(blk.args)])
                rest = rest[len(blk.args):]
        elif name == "tt.call":
            callee = self.module.functions.get(op.attrs.get("callee"))
            if callee is not None:
                self.flow_all(callee.args, op.operands)
                for ret in walk(callee.body):
                    if ret.name == "tt.return":
                        self.flow_all(op.results, ret.operands)
        elif op.regions:  # scf.if and the like: its results are what its regions yield (yield_into)
            return
        else:
            for r in op.results:  # a pointer from memory, from an integer, or from an op not listed
                self.flow(r, UNKNOWN)

    def yield_into(self, op):
        parent = op.parent_op
        if parent is None:
            return
        if parent.name == "scf.for":
            body = parent.regions[0].blocks[0]
            self.flow_all(body.args[1:], op.operands)
            self.flow_all(parent.results, op.operands)
        elif parent.name == "scf.while":  # the after region yields the next iteration's before arguments
            self.flow_all(parent.regions[0].blocks[0].args, op.operands)
        else:  # scf.if and the like: the region's values are the op's results
            self.flow_all(parent.results, op.operands)


def base_args(module) -> dict:
    """id(pointer Value) -> the index of the kernel argument it derives from, for the values that derive
    from exactly one; the others are absent."""
    facts = _Flow(module).run()
    return {k: next(iter(f)) for k, f in facts.items() if f is not None and f is not UNKNOWN and len(f) == 1}
