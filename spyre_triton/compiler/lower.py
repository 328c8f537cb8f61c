"""Lower a parsed TTIR module to a Spyre `Program`.

One pass over the kernel's ops in program order. Each SSA value becomes a `Const`, `Scalar`,
`Affine` or `Tile` (see values.py); pointer arithmetic stays affine so that loads and stores through
it become DMA descriptors, and anything irregular falls back to gather/scatter. Tiles get LX space
afterwards, by liveness (lx_alloc.py). Ops are dispatched through `LOWER`, the handler modules' tables
merged (registry.py): ops_arith (arith, math, Triton's elementwise ops), ops (Triton's core ops), ops_scf,
ops_tensor, ops_scaled_dot.
"""
from __future__ import annotations

import linecache
import os
from collections import Counter
from math import prod

from .. import isa
from ..asm import ArgSpec, Program
from . import dtypes, lx_alloc
from .errors import CompilationError
from . import dead, fusion, hoist, masks, provenance, splits, sregs, views
from . import ops, ops_arith, ops_scaled_dot, ops_scf, ops_tensor, registry
from .mir import Label, MachineFunction
from .ttir import walk
from .values import Affine, Bounds, Buffer, Const, Facts, Scalar, Tile, is_scalar, shape_of

TILE_ALIGN = 64
_TRITON_LANG = os.path.join("triton", "language") + os.sep


class Lowering:
    def __init__(self, module, lx_budget: int, elide_copies: bool = True, fp_fusion: bool = True):
        self.module = module
        self.elide_copies = elide_copies
        self.fp_fusion = fp_fusion
        self.kernel = module.kernel
        self.lx_budget = lx_budget
        self.prog = Program(self.kernel.name)
        self.mf = MachineFunction(self.prog.descs)  # what is emitted (mir.py)
        self.values = {}  # ttir Value -> lowered value
        self.n_slots = 0
        self.const_slots = {}
        self.loc_index = {}
        self.cur_loc = -1
        self.cur_op = None
        self.materialize_carry = set()  # (id(loop op), arg index) that must not stay affine
        self.call_depth = 0
        self.depth = 0  # block nesting, for the cache of values computed once (MachineFunction.cache)
        self.uses = None  # id(TTIR value) -> operands reading it, counted on first need (use_count)
        self.bases = provenance.base_args(module)  # id(pointer value) -> the kernel argument it derives from

    # -- the pass -----------------------------------------------------------------------------
    def run(self) -> Program:
        fn = self.kernel
        for i, arg in enumerate(fn.args):
            # Triton prints arguments by their Python names (%x_ptr); errors name them so
            name = arg.name if arg.name and not arg.name[0].isdigit() else f"arg{i}"
            kind, dtype = dtypes.arg_kind(arg.type)
            slot = self.new_scalar(dtypes.storage(arg.type))
            if kind == "int":  # Triton specialises an integer argument divisible by 16 (tt.divisibility)
                div = fn.arg_attrs[i].get("tt.divisibility", 1) if i < len(fn.arg_attrs) else 1
                slot = splits.with_facts(slot, Facts(mult=int(div))) if isinstance(div, int) and div > 1 else slot
            self.values[arg] = slot
            self.prog.args.append(ArgSpec(name, kind, dtype, slot.slot * isa.SREG_BYTES))
        self.set_loc(fn.loc)
        self.lower_region(fn.body, [], lambda vals: self.emit("halt"))
        if not len(self.mf) or self.mf[-1].op != "halt":
            self.emit("halt")
        return self.finish()

    def finish(self) -> Program:
        mf = dead.drop_dead_tiles(self.mf)
        if self.fp_fusion:
            mf = fusion.fuse_multiply_add(mf)
        mf = fusion.fuse_binary_chains(mf)
        if self.elide_copies:
            mf = views.elide_copies(mf)
        mf.arg_slots = {a.slot // isa.SREG_BYTES for a in self.prog.args}
        mf = hoist.hoist_launch_invariants(mf).flatten()
        self.mf = mf
        in_place = {i for i, insn in enumerate(mf.insns) if insn.op in isa.SAME_SIZE_ELEMENTWISE}
        lx_bytes, lx_profile = lx_alloc.allocate(mf.buffers, mf.loops, self.lx_budget, self.prog.name, self.describe_use, in_place)
        # the arguments (written by the launcher) and the launch invariants (constants, hoisted argument
        # arithmetic: computed once per core and launch) keep their registers for the whole program
        lead = {v.slot for insn in mf.insns[:mf.n_invariant] for v in insn.args.values() if isinstance(v, Scalar)}
        slots, n_sregs = sregs.allocate(mf.insns, mf.descs, mf.loops, mf.arg_slots, lead, self.prog.name,
                                        self.describe_use)
        sregs.apply(mf.insns, mf.descs, slots)
        self.prog.n_sregs = n_sregs
        self.prog.lx_bytes = lx_bytes
        self.prog.lx_profile = lx_profile
        sreg_bytes = n_sregs * isa.SREG_BYTES
        for d in mf.descs:  # offset vectors: LX tiles, placed now
            d.strides = tuple(("v", sreg_bytes + s.buf.offset + s.off) if isinstance(s, Tile) else s for s in d.strides)
        for insn in mf.insns:
            for k, v in list(insn.args.items()):
                if isinstance(v, Scalar):
                    insn.args[k] = v.slot * isa.SREG_BYTES
                elif isinstance(v, Tile):
                    insn.args[k] = sreg_bytes + v.buf.offset + v.off
                elif isinstance(v, Label):
                    insn.args[k] = v.index
            self.prog.insns.append(insn)
        return self.prog

    # -- trying a lowering and taking it back ---------------------------------------------------
    def describe_use(self, insn_index: int) -> str:
        insns = self.mf.prologue + self.mf.insns
        loc = insns[insn_index].loc if 0 <= insn_index < len(insns) else -1
        return self.loc_text(loc)

    def loc_text(self, loc: int) -> str:
        if loc < 0:
            return "<unknown location>"
        file, line, text = self.prog.locs[loc]
        return f"{file}:{line}: {text.strip()}"

    # -- emission helpers ---------------------------------------------------------------------
    def set_loc(self, loc):
        # Point at the user's code: skip frames inside Triton's own language library (tl.sum's body).
        while loc is not None and loc.caller is not None and _TRITON_LANG in (loc.file or ""):
            loc = loc.caller
        if loc is None or not getattr(loc, "file", None):
            return
        key = (loc.file, loc.line)
        if key not in self.loc_index:
            self.loc_index[key] = len(self.prog.locs)
            self.prog.locs.append((loc.file, loc.line, linecache.getline(loc.file, loc.line).rstrip()))
        self.cur_loc = self.loc_index[key]

    def base_arg(self, ptr) -> dict:
        """The `arg` flag of an access through the TTIR pointer value `ptr` (isa.BASE_ARG): the argument it
        derives from, counted from 1, so the runtime checks the access against that argument's allocation;
        nothing when that is not known (the access is then checked against every allocation)."""
        i = self.bases.get(id(ptr))
        return {"arg": i + 1} if i is not None and i + 1 < (1 << isa.BASE_ARG.bits) else {}

    def emit(self, op, t="i32", t2="i1", flags=None, **args) -> isa.Insn:
        insn = isa.Insn(op, t, t2, {k: v for k, v in args.items() if v is not None}, dict(flags or {}), self.cur_loc)
        for k, v in args.items():
            if v is None and k in {f for f, kind, _ in isa.OPCODE_BY_NAME[op].operands if kind == "v?"}:
                insn.args[k] = isa.NONE
        return self.mf.append(insn)

    def place(self, label: Label):
        self.mf.place(label)

    def new_scalar(self, dtype: str) -> Scalar:
        """A fresh register; sregs.py gives registers whose lives do not overlap one slot (finish)."""
        self.n_slots += 1
        return Scalar(self.n_slots - 1, dtype)

    def new_tile(self, shape, dtype) -> Tile:
        nbytes = max(prod(shape), 1) * dtypes.nbytes(dtype)
        buf = Buffer((nbytes + TILE_ALIGN - 1) // TILE_ALIGN * TILE_ALIGN,
                     what=f"{self.cur_op.name if self.cur_op else '?'} at {self.loc_text(self.cur_loc)}")
        self.mf.add_buffer(buf)
        return Tile(buf, 0, tuple(shape), dtype)

    def new_like(self, shape, dtype):
        return self.new_tile(shape, dtype) if shape else self.new_scalar(dtype)

    def const_slot(self, c: Const) -> Scalar:
        key = (dtypes.const_bits(c.value, c.dtype), c.dtype)
        if key not in self.const_slots:
            slot = self.new_scalar(c.dtype)
            k = self.const_index(c)
            self.mf.prologue.append(isa.Insn("const", c.dtype, "i1", {"a": slot, "b": k, "n": 1}, {}, -1))
            self.const_slots[key] = slot
        return self.const_slots[key]

    def const_index(self, c: Const) -> int:
        bits = dtypes.const_bits(c.value, c.dtype)
        if bits not in self.prog.consts:
            self.prog.consts.append(bits)
        return self.prog.consts.index(bits)

    def error(self, msg: str) -> CompilationError:
        op = self.cur_op.name if self.cur_op is not None else "?"
        return CompilationError(f"kernel {self.prog.name}: {op}: {msg}\n  at {self.loc_text(self.cur_loc)}")

    # -- turning lowered values into operands -------------------------------------------------
    def val(self, v):
        try:
            return self.values[v]
        except KeyError:
            raise self.error(f"value {v.name} used before it was lowered") from None

    def operand(self, v):
        """An instruction operand for `v` and whether it is broadcast (a scalar register)."""
        if isinstance(v, Bounds) or (isinstance(v, Affine) and not v.is_splat):
            v = self.materialized(v)
        elif isinstance(v, Affine):
            v = v.base
        if isinstance(v, Const):
            v = self.const_slot(v)
        if isinstance(v, Scalar):
            return v, True
        if v.numel == 1:
            return v, True
        return v, False

    def scalar(self, v):
        """`v` (a scalar value) in a scalar register."""
        if isinstance(v, Const):
            return self.const_slot(v)
        if isinstance(v, Scalar):
            return v
        if isinstance(v, Affine) and (v.is_splat or prod(v.shape) == 1):  # every index is 0: the base
            return self.scalar(v.base)
        if isinstance(v, Bounds) and prod(v.shape) == 1:
            v = self.materialized(v)
        if isinstance(v, Tile) and v.numel == 1:
            out = self.new_scalar(v.dtype)
            self.emit("copy", v.dtype, a=out, b=v, n=1)
            return out
        raise self.error("expected a scalar")

    def tile(self, v) -> Tile:
        """`v` as a dense tile in LX."""
        if isinstance(v, Tile):
            return v
        if isinstance(v, (Affine, Bounds)):
            return self.materialized(v)
        raise self.error("expected a tensor")

    def materialized(self, v) -> Tile:
        """The elements of an Affine or Bounds value as a tile, computed once per value where the
        first computation dominates the later uses (the cache forgets what a block computed when
        the block ends)."""
        hit = self.mf.recall(id(v))
        if hit is not None:
            return hit
        t = masks.materialize(self, v) if isinstance(v, Bounds) else self.materialize(v)
        self.mf.remember(id(v), t, self.depth, keep=v)
        return t

    def materialize(self, a: Affine, into: Tile | None = None) -> Tile:
        out = into if into is not None else self.new_tile(a.shape, a.dtype)
        n = prod(a.shape)
        if a.is_splat:
            src, _ = self.operand(a.base)
            self.emit("copy", a.dtype, a=out, b=src, n=n, flags={"bc1": 1})
            return out
        first = True
        for d, coef in enumerate(a.coefs):
            if coef is None:
                continue
            if isinstance(coef, Tile):  # an offset vector: its values along dimension d
                r = coef
                if a.shape[d] != n:
                    strides = tuple(1 if k == d else 0 for k in range(len(a.shape)))
                    r = out if first else self.new_tile(a.shape, a.dtype)
                    self.emit("tcopy", a.dtype, a=r, b=coef, c=self.desc(a.shape, strides))
                if first and r is not out:
                    self.emit("copy", a.dtype, a=out, b=r, n=n)
                elif not first:
                    self.emit("add", a.dtype, a=out, b=out, c=r, n=n)
                first = False
                continue
            if (first and isinstance(a.base, Const) and isinstance(coef, Const) and coef.value == 1
                    and sum(c is not None for c in a.coefs) == 1 and -2**31 <= a.base.value < 2**31
                    and a.shape[d] == n):
                self.emit("iota", a.dtype, a=out, b=a.base.value & 0xFFFFFFFF, n=n)
                return out
            r = out if first and a.shape[d] == n else self.new_tile((a.shape[d],), a.dtype)
            self.emit("iota", a.dtype, a=r, b=0, n=a.shape[d])
            if not (isinstance(coef, Const) and coef.value == 1):
                c, _ = self.operand(coef)
                self.emit("mul", a.dtype, a=r, b=r, c=c, n=a.shape[d], flags={"bc2": 1})
            if a.shape[d] != n:
                strides = tuple(1 if k == d else 0 for k in range(len(a.shape)))
                full = out if first else self.new_tile(a.shape, a.dtype)
                self.emit("tcopy", a.dtype, a=full, b=r, c=self.desc(a.shape, strides))
                r = full
            if first:
                if r is not out:
                    self.emit("copy", a.dtype, a=out, b=r, n=n)
            else:
                self.emit("add", a.dtype, a=out, b=out, c=r, n=n)
            first = False
        if not (isinstance(a.base, Const) and a.base.value == 0):
            b, _ = self.operand(a.base)
            self.emit("add", a.dtype, a=out, b=out, c=b, n=n, flags={"bc2": 1})
        return out

    def desc(self, shape, strides, limits=()) -> int:
        """A descriptor; a stride is a constant, a Scalar or (ld/st) a Tile offset vector, placed in finish."""
        slot = lambda s: ("s", s.slot * isa.SREG_BYTES)
        d = isa.Descriptor(tuple(shape), tuple(slot(s) if isinstance(s, Scalar) else s for s in strides),
                           tuple(None if lim is None else slot(lim) for lim in limits))
        return self.mf.add_desc(d)

    # -- scalar arithmetic with constant folding ----------------------------------------------
    def s_binop(self, op: str, a, b, dtype: str):
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(dtypes.fold(op, a.value, b.value, dtype), dtype)
        if op == "add" and isinstance(b, Const) and b.value == 0:
            return a
        if op == "add" and isinstance(a, Const) and a.value == 0:
            return b
        if op == "sub" and isinstance(b, Const) and b.value == 0:
            return a
        if op == "mul" and isinstance(b, Const) and b.value == 1:
            return a
        if op == "mul" and isinstance(a, Const) and a.value == 1:
            return b
        if op == "mul" and ((isinstance(a, Const) and a.value == 0) or (isinstance(b, Const) and b.value == 0)):
            return Const(0, dtype)

        def compute():
            out = self.new_scalar(dtype)
            self.emit(op, dtype, a=out, b=self.scalar(a), c=self.scalar(b), n=1)
            return splits.with_facts(out, splits.binop(op, a, b))  # what index splits need to know
        return self.common(("s_binop", op, a, b, dtype), compute)

    def s_cast(self, x, dtype: str):
        """Integer scalar `x` sign-extended or truncated to `dtype`."""
        if x is None or x.dtype == dtype:
            return x
        if isinstance(x, Const):
            return Const(dtypes.wrap(x.value, dtype), dtype)

        def compute():
            out = self.new_scalar(dtype)
            self.emit("cvt", dtype, x.dtype, a=out, b=x, n=1, flags={"mode": "sext"})
            return splits.with_facts(out, splits.cast(splits.facts_of(x), x.dtype, dtype))
        return self.common(("s_cast", x, dtype), compute)

    def common(self, key, compute):
        """Scalar address arithmetic computed once where the first computation dominates (the same
        scoping as `materialized`; loop-carried registers are only rewritten at block ends)."""
        hit = self.mf.recall(key)
        if hit is not None:
            return hit
        v = compute()
        self.mf.remember(key, v, self.depth)
        return v

    # -- elementwise --------------------------------------------------------------------------
    def elementwise(self, opcode: str, t: str, srcs, out_dtype: str | None = None, flags=None, out=None, t2="i1"):
        if t.startswith("f8"):
            if opcode == "select":  # moves bytes: the same as on i8
                r = self.elementwise(opcode, "i8", [srcs[0]] + [self._as_bytes(v) for v in srcs[1:]])
                return r.view(dtype=t) if isinstance(r, Tile) else Scalar(r.slot, t)
            if opcode in _FP8_VIA_F32:
                return self._fp8_via_f32(opcode, t, srcs, out_dtype, flags, out)
        return self._elementwise(opcode, t, srcs, out_dtype, flags, out, t2)

    def _fp8_via_f32(self, opcode, t, srcs, out_dtype, flags, out):
        """fp8 arithmetic: widen exactly to f32, compute, round back once (rtne), as GPUs do."""
        wide = [Const(float(v.value), "f32") if isinstance(v, Const) else
                self._elementwise("cvt", "f32", [v], flags={"mode": "fpext"}, t2=t) for v in srcs]
        if out_dtype == "i1":
            return self._elementwise(opcode, "f32", wide, out_dtype="i1", flags=flags, out=out)
        r = self._elementwise(opcode, "f32", wide, flags=flags)
        return self._elementwise("cvt", t, [r], flags={"mode": "rtne"}, t2="f32", out=out)

    def _as_bytes(self, v):
        if isinstance(v, Const):
            return Const(dtypes.wrap(dtypes.const_bits(v.value, v.dtype), "i8"), "i8")
        v = self.tile(v) if shape_of(v) else self.scalar(v)
        return v.view(dtype="i8") if isinstance(v, Tile) else Scalar(v.slot, "i8")

    def _elementwise(self, opcode: str, t: str, srcs, out_dtype: str | None = None, flags=None, out=None, t2="i1"):
        shape = ()
        for s in srcs:
            if shape_of(s) and prod(shape_of(s)) >= prod(shape or (1,)):
                shape = shape_of(s)
        ops, fl = [], dict(flags or {})
        for i, s in enumerate(srcs, 1):
            o, bc = self.operand(s)
            if bc and shape:
                fl[f"bc{i}"] = 1
            ops.append(o)
        if out is None:
            out = self.new_like(shape, out_dtype or t)
        fields = dict(zip("bcd", ops))
        self.emit(opcode, t, t2, flags=fl, a=out, n=prod(shape) if shape else 1, **fields)
        return out

    # -- blocks and regions -------------------------------------------------------------------
    def lower_block(self, block):
        self.depth += 1
        try:
            for op in block.ops:
                if op.name in TERMINATORS:
                    self.cur_op = op
                    self.set_loc(op.loc)
                    return [self.val(v) for v in op.operands], op
                self.lower_op(op)
            return [], None
        finally:
            self.depth -= 1
            self.mf.forget_deeper(self.depth)

    def lower_op(self, op):
        self.cur_op = op
        self.set_loc(op.loc)
        handler = LOWER.get(op.name)
        if handler is None:
            raise self.error(f"the op {op.name} is not supported by the Spyre backend")
        results = handler(self, op)
        if results is None:
            results = []
        elif not isinstance(results, (list, tuple)):
            results = [results]
        if len(results) != len(op.results):
            raise self.error(f"lowering produced {len(results)} results for {len(op.results)}")
        for r, v in zip(op.results, results):
            self.values[r] = v

    def inline_region(self, region, args):
        block = region.blocks[0]
        for a, v in zip(block.args, args):
            self.values[a] = v
        vals, _ = self.lower_block(block)
        return vals

    def lower_region(self, region, args, on_return):
        """A function body: one block, or several joined by cf.br / cf.cond_br (early returns, as in
        Inductor's matmul templates' `if M * N == 0: return`). Blocks are laid out in order, block
        arguments live in storage, branches become jumps. `on_return(values)` lowers tt.return."""
        blocks = region.blocks
        for a, v in zip(blocks[0].args, args):
            self.values[a] = v
        labels = {id(b): Label() for b in blocks}
        for b in blocks[1:]:
            for a in b.args:
                self.values[a] = self.storage_for(None, tuple(a.type.shape) if a.type.kind == "tensor" else (),
                                                  dtypes.storage(a.type), False)
        for b in blocks:
            self.place(labels[id(b)])
            vals, term = self.lower_block(b)
            name = term.name if term is not None else "tt.return"
            if name == "tt.return":
                on_return(vals)
            elif name == "cf.br":
                self._branch(term.successors[0], vals, labels)
            elif name == "cf.cond_br":
                rest = vals[1:]
                t_blk, f_blk = term.successors
                t_args, f_args = rest[:len(t_blk.args)], rest[len(t_blk.args):]
                on_false = Label()
                self.emit("brz", "i1", a=self.scalar(vals[0]), b=on_false)
                self._branch(t_blk, t_args, labels)
                self.place(on_false)
                self._branch(f_blk, f_args, labels)
            else:
                raise self.error(f"{name} cannot end a function body")

    def _branch(self, target, vals, labels):
        self.parallel_store([self.values[a] for a in target.args], vals)
        label = labels[id(target)]
        self.emit("jmp", a=label)
        if label.index is not None:  # a backward branch: a loop, for liveness
            self.mf.add_loop(label.index)

    # -- loop-carried storage -----------------------------------------------------------------
    def storage_for(self, v, shape, dtype, keep_affine: bool):
        """Fresh storage that can hold `v` (shape, dtype) across control flow."""
        if isinstance(v, Affine) and not v.is_splat and keep_affine:
            return Affine(self.new_scalar(v.base.dtype), v.coefs, v.shape, v.dtype)
        return self.new_tile(shape, dtype) if shape else self.new_scalar(dtype)

    def store_into(self, dst, src):
        if isinstance(dst, Scalar):
            s = self.scalar(src)
            if s != dst:
                self.emit("copy", dst.dtype, a=dst, b=s, n=1)
        elif isinstance(dst, Affine):
            self.store_into(dst.base, self.s_cast(src.base, dst.base.dtype))
        elif isinstance(src, Affine) and not src.is_splat:
            self.materialize(src, into=dst)
        else:
            o, bc = self.operand(src)
            if o is not dst:
                self.emit("copy", dst.dtype, a=dst, b=o, n=dst.numel, flags={"bc1": 1} if bc else {})

    def parallel_store(self, dsts, srcs):
        """Copy srcs into dsts as if all at once (a yield may swap loop-carried values)."""
        dst_keys = {self._storage_key(d) for d in dsts}
        staged = []
        for d, s in zip(dsts, srcs):
            key = self._storage_key(s)
            if key is not None and key in dst_keys and key != self._storage_key(d):
                tmp = self.storage_for(s, shape_of(s), s.dtype, keep_affine=isinstance(d, Affine))
                self.store_into(tmp, s)
                s = tmp
            staged.append(s)
        for d, s in zip(dsts, staged):
            self.store_into(d, s)

    @staticmethod
    def _storage_key(v):
        if isinstance(v, Scalar):
            return ("s", v.slot)
        if isinstance(v, Tile):
            return ("t", id(v.buf))
        if isinstance(v, Affine) and isinstance(v.base, Scalar):
            return ("s", v.base.slot)
        return None

    def retarget(self, r, dst: Tile) -> bool:
        """If r is a fresh tile written by exactly one instruction and read by none, make that
        instruction write dst instead (saving a copy) and return True. dst must not be read after
        that instruction; an instruction reading dst itself is fine (the runtime computes a result
        that overlaps a source aside)."""
        if not isinstance(r, Tile) or not isinstance(dst, Tile) or r.buf is dst.buf:
            return False
        if r.numel != dst.numel or dtypes.nbytes(r.dtype) != dtypes.nbytes(dst.dtype) or len(r.buf.uses) != 1:
            return False
        i = r.buf.uses[0]
        if any(u > i for u in dst.buf.uses):
            return False
        insn = self.mf[i]
        fields = isa.OPCODE_BY_NAME[insn.op].operands
        if not fields or fields[0][2] != "dst":
            return False
        a = insn.args.get(fields[0][0])
        if not (isinstance(a, Tile) and a.buf is r.buf and a.off == r.off and a.numel == r.numel):
            return False
        def undo():
            insn.args[fields[0][0]] = a
            r.buf.uses.append(i)
            dst.buf.uses.remove(i)
        self.mf.record_undo(undo)
        insn.args[fields[0][0]] = dst.view(r.shape, dtype=a.dtype)
        dst.buf.uses.append(i)
        r.buf.uses.clear()
        return True

    def use_count(self, value) -> int:
        """How many operands in the kernel read this TTIR value (counted once per kernel)."""
        if self.uses is None:
            self.uses = Counter(id(v) for op in walk(self.module) for v in op.operands)
        return self.uses[id(value)]

    def affine_compatible(self, carried, y) -> bool:
        return isinstance(y, Affine) and y.shape == carried.shape and y.coefs == carried.coefs


# float instructions the vector unit runs on fp8 through f32 (it has no fp8 arithmetic)
_FP8_VIA_F32 = {"add", "sub", "mul", "divf", "remf", "maxnumf", "minnumf", "maximumf", "minimumf", "cmpf", "fma",
                "clamp", "math1", "math2"}

TERMINATORS = {"scf.yield", "tt.return", "tt.reduce.return", "tt.scan.return", "scf.condition", "cf.br",
               "cf.cond_br"}


def lower_module(module, lx_budget: int, elide_copies: bool = True, fp_fusion: bool = True) -> Program:
    return Lowering(module, lx_budget, elide_copies, fp_fusion).run()


LOWER = registry.merge(ops_arith, ops, ops_scf, ops_tensor, ops_scaled_dot)
