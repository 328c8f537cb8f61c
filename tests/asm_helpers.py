"""Helpers for testing with Spyre programs: writing them, running them, and reading compiled ones.

`Builder` assembles a `Program` instruction by instruction (value operands as arena offsets via
`s(i)` for scalar slots and `x(off)` for LX), `DevBuf` is device memory (`_runtime.alloc`) viewed as
a numpy array, and `run_elementwise` wraps one vector instruction in ld / op / st so a test can
compare it against numpy in one line. `program`, `insns`, `mnemonics` and `offset_vector_descs` read
a compiled kernel's assembly back through the assembler's parser, so tests check instructions and
descriptors, not text.

This is the one test module that imports the assembler (`spyre_triton.asm`); tests take
`Program`, `parse_asm`, `ArgSpec` and `AsmError` from here.
"""
from __future__ import annotations

import ctypes

import numpy as np

from spyre_triton import _runtime as rt
from spyre_triton import isa
from spyre_triton.asm import ArgSpec, AsmError, Program, parse_asm  # noqa: F401 (re-exported)

# dtype name -> numpy storage dtype (f16 is numpy's; bf16 and fp8 are raw bits)
NP = {
    "i1": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
    "f8e4m3fn": np.uint8, "f8e5m2": np.uint8, "f8e4m3fnuz": np.uint8, "f8e5m2fnuz": np.uint8, "f8e4m3b15": np.uint8,
}
UNSIGNED = {"i1": np.uint8, "i8": np.uint8, "i16": np.uint16, "i32": np.uint32, "i64": np.uint64}


def nbytes_of(t: str) -> int:
    return isa.DTYPE_BY_NAME[t].nbytes


class DevBuf:
    """An allocation on a Spyre device, with numpy views of its bytes."""

    def __init__(self, nbytes: int, device: int = 0):
        self.device = device
        self.nbytes = nbytes
        self.addr = rt.alloc(device, nbytes)
        self._raw = (ctypes.c_char * max(nbytes, 1)).from_address(self.addr)

    def data_ptr(self) -> int:
        return self.addr

    def view(self, dtype, count=None, offset=0) -> np.ndarray:
        arr = np.frombuffer(self._raw, dtype=np.uint8, count=self.nbytes)[offset:]
        arr = arr[: (len(arr) // np.dtype(dtype).itemsize) * np.dtype(dtype).itemsize].view(dtype)
        return arr if count is None else arr[:count]

    def free(self):
        if self.addr:
            rt.free(self.device, self.addr)
            self.addr = 0

    @staticmethod
    def of(arr: np.ndarray, device: int = 0, pad: int = 0) -> "DevBuf":
        arr = np.ascontiguousarray(arr)
        b = DevBuf(arr.nbytes + pad, device)
        b.view(np.uint8)[: arr.nbytes] = arr.view(np.uint8).reshape(-1)
        return b


class Builder:
    def __init__(self, name: str = "k", n_sregs: int = 32, lx_bytes: int = 1 << 16):
        self.p = Program(name, n_sregs=n_sregs, lx_bytes=lx_bytes)

    # operands
    def s(self, i: int) -> int:
        return i * isa.SREG_BYTES

    def x(self, off: int) -> int:
        return self.p.sreg_bytes + off

    # tables
    def arg(self, name, kind, dtype="-", slot=-1):
        self.p.args.append(ArgSpec(name, kind, dtype, slot))

    def const(self, raw: int) -> int:
        self.p.consts.append(raw & 0xFFFFFFFFFFFFFFFF)
        return len(self.p.consts) - 1

    def desc(self, shape, strides) -> int:
        self.p.descs.append(isa.Descriptor(tuple(shape), tuple(strides)))
        return len(self.p.descs) - 1

    def string(self, s: str) -> int:
        self.p.strings.append(s)
        return len(self.p.strings) - 1

    def loc(self, file: str, line: int, text: str) -> int:
        self.p.locs.append((file, line, text))
        return len(self.p.locs) - 1

    def emit(self, op: str, t: str = "i32", t2: str = "i1", loc: int = -1, flags=None, **args) -> int:
        self.p.insns.append(isa.Insn(op, t, t2, dict(args), dict(flags or {}), loc))
        return len(self.p.insns) - 1

    def here(self) -> int:
        return len(self.p.insns)

    def binary(self) -> bytes:
        return self.p.encode()

    def build(self) -> "rt.Kernel":
        return rt.Kernel(self.p.encode())


def const_bits(t: str, value) -> int:
    """Raw bits of a scalar value of dtype t (a Python number, or raw bits for bf16/fp8)."""
    dt = np.dtype(NP[t])
    if t in ("bf16",) or t.startswith("f8"):
        return int(value)
    return int(np.array([value], dtype=dt).view(UNSIGNED.get(t, {2: np.uint16, 4: np.uint32, 8: np.uint64}
                                                               .get(dt.itemsize, np.uint8)))[0])


def run_elementwise(op: str, t: str, inputs, out_t: str | None = None, t2: str = "i1", flags=None,
                    bcast=(), num_threads=1, n: int | None = None) -> np.ndarray:
    """dst = op(inputs...) on LX: each input (a numpy array in dtype t's storage, or t2's for the
    first input of cvt; i1 for select's condition) is loaded, the op runs on n elements, the result
    (dtype out_t, default t) is stored and returned. Inputs listed in `bcast` (1-based) are single
    elements read with the broadcast flag; n defaults to the longest input."""
    out_t = out_t or t
    inputs = [np.ascontiguousarray(a) for a in inputs]
    n = max(len(a) for a in inputs) if n is None else n
    lx = sum((a.nbytes + 63) // 64 * 64 + 64 for a in inputs) + n * nbytes_of(out_t) + 64
    b = Builder(op, lx_bytes=max(1 << 16, (lx + 4095) // 4096 * 4096))
    bufs = [DevBuf.of(a, pad=8) for a in inputs]
    out = DevBuf(max(n * nbytes_of(out_t), 1) + 8)
    off = 0
    srcs = []
    for i, a in enumerate(inputs):
        b.arg(f"in{i}", "ptr", "i8", b.s(i))
        x = b.x(off)
        d = b.desc([len(a)], [a.itemsize])
        b.emit("ld", "i8" if a.itemsize == 1 else {2: "i16", 4: "i32", 8: "i64"}[a.itemsize],
               a=x, b=b.s(i), c=d)
        srcs.append(x)
        off += (a.nbytes + 63) // 64 * 64 + 64
    b.arg("out", "ptr", "i8", b.s(len(inputs)))
    xo = b.x(off)
    fl = dict(flags or {})
    for k in bcast:
        fl[f"bc{k}"] = 1
    fields = ["b", "c", "d"]
    args = {"a": xo, "n": n}
    for f, x in zip(fields, srcs):
        args[f] = x
    b.emit(op, t, t2, flags=fl, **args)
    osz = nbytes_of(out_t)
    b.emit("st", {1: "i8", 2: "i16", 4: "i32", 8: "i64"}[osz], a=b.s(len(inputs)), b=b.desc([n], [osz]), c=xo)
    k = b.build()
    k.launch(0, 1, 1, 1, tuple(bufs) + (out,), num_threads=num_threads)
    res = out.view(NP[out_t], n).copy()
    for x in bufs + [out]:
        x.free()
    return res


def run_red(op, t, src, outer, length, inner):
    """`red` op over src (dtype t's storage) viewed as [outer, length, inner]: the [outer, inner] result."""
    lx = (src.nbytes + 63) // 64 * 64 + outer * inner * nbytes_of(t)
    b = Builder("red", lx_bytes=max(1 << 20, (lx + 4095) // 4096 * 4096))
    sb = DevBuf.of(src, pad=8)
    out = DevBuf(outer * inner * nbytes_of(t) + 8)
    b.arg("s", "ptr", "i8", b.s(0))
    b.arg("o", "ptr", "i8", b.s(1))
    es = nbytes_of(t)
    it = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}[es]
    b.emit("ld", it, a=b.x(0), b=b.s(0), c=b.desc([src.size], [es]))
    xo = b.x((src.nbytes + 63) // 64 * 64)
    b.emit("red", t, a=xo, b=b.x(0), c=outer, d=length, e=inner, flags={"op": op})
    b.emit("st", it, a=b.s(1), b=b.desc([outer * inner], [es]), c=xo)
    b.build().launch(0, 1, 1, 1, (sb, out))
    r = out.view(NP[t], outer * inner).copy()
    sb.free()
    out.free()
    return r


def program(kernel) -> Program:
    """A compiled kernel's assembly (`kernel.asm["spyreasm"]`, or the text itself) parsed back into a
    Program: its instructions (`isa.Insn`), descriptors, constants and arguments."""
    return parse_asm(kernel if isinstance(kernel, str) else kernel.asm["spyreasm"])


def insns(kernel, *ops: str) -> list:
    """The kernel's instructions, in program order; with `ops`, only those named (any dtype)."""
    return [i for i in program(kernel).insns if not ops or i.op in ops]


def mnemonics(kernel) -> list:
    """The mnemonics of a compiled kernel's instructions as the assembler spells them, with their
    dtypes: 'fma.f32', 'cvt.f32.i32', 'jmp'."""
    prog = program(kernel)
    return [prog._insn_asm(i).split(" ", 1)[0] for i in prog.insns]


def in_lx(prog: Program, off: int) -> bool:
    """Whether a value operand is a tile in LX (not a scalar register, not absent)."""
    return off != isa.NONE and off >= prog.sreg_bytes


def through_views(insn) -> list:
    """The operand fields an instruction reads or writes through a view register (`@v<k>`)."""
    return [f for f, flag in isa.VIEW.items() if insn.flags.get(flag.name)]


def offset_vector_descs(kernel) -> list:
    """The DMA descriptors with a dimension that steps through an offset vector in LX (a per-index
    byte offset) instead of a constant or register stride."""
    return [d for d in program(kernel).descs if any(isinstance(s, tuple) and s[0] == "v" for s in d.strides)]
