"""A compiled Spyre kernel: instructions plus the tables they index, as assembly text and as binary.

`Program` is what the lowering produces. `to_asm` prints the readable assembly that Triton keeps as
`kernel.asm["spyreasm"]`; `parse_asm` reads it back (the compiler's last stage assembles it);
`encode`/`decode` convert to and from the `spyrebin` binary that the launcher loads. Both formats
are driven by the opcode table in `spyre_triton.isa`.

Binary layout (little endian):
    header  "SPYB", u32 isa version, u32 section count (5), then per section u32 offset, u32 size
    insns   32 bytes each (isa.INSN_STRUCT)
    consts  u64 raw bit patterns
    descs   isa.DESC_STRUCT records
    locs    i32 per instruction: index into the location table, or -1
    meta    UTF-8 JSON: name, arguments, scalar register count, LX bytes, strings, locations
"""
from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field

from . import isa

MAGIC = isa.BINARY_MAGIC
_HEADER = struct.Struct("<4sII")
_SECTION = struct.Struct("<II")
_SECTIONS = isa.BINARY_SECTIONS


@dataclass
class ArgSpec:
    """One kernel argument, in signature order (constexprs included, as the launcher receives them)."""
    name: str
    kind: str  # 'ptr' | 'int' | 'float' | 'constexpr' | 'none'
    dtype: str = "-"  # pointee dtype for ptr, value dtype for int/float
    slot: int = -1  # scalar register offset receiving the value, -1 when the kernel does not use it


@dataclass
class Program:
    name: str
    insns: list = field(default_factory=list)
    consts: list = field(default_factory=list)  # u64 raw bit patterns
    descs: list = field(default_factory=list)  # isa.Descriptor
    strings: list = field(default_factory=list)
    locs: list = field(default_factory=list)  # (file, line, source text)
    args: list = field(default_factory=list)  # ArgSpec
    n_sregs: int = 0
    lx_bytes: int = 0
    lx_profile: list = field(default_factory=list)  # [instruction index, LX bytes live] where it changes

    @property
    def sreg_bytes(self) -> int:
        return self.n_sregs * isa.SREG_BYTES

    @property
    def arena_bytes(self) -> int:
        return self.sreg_bytes + self.lx_bytes

    # -- binary -------------------------------------------------------------------------------
    def encode(self) -> bytes:
        meta = {
            "name": self.name, "n_sregs": self.n_sregs, "lx_bytes": self.lx_bytes, "lx_profile": self.lx_profile,
            "args": [[a.name, a.kind, a.dtype, a.slot] for a in self.args],
            "strings": self.strings, "locs": [list(x) for x in self.locs],
        }
        sections = [
            b"".join(isa.encode_insn(i) for i in self.insns),
            struct.pack(f"<{len(self.consts)}Q", *[c & 0xFFFFFFFFFFFFFFFF for c in self.consts]),
            b"".join(d.encode() for d in self.descs),
            struct.pack(f"<{len(self.insns)}i", *[i.loc for i in self.insns]),
            json.dumps(meta).encode(),
        ]
        header = _HEADER.pack(MAGIC, isa.ISA_VERSION, len(sections))
        offset = len(header) + _SECTION.size * len(sections)
        table = b""
        for s in sections:
            table += _SECTION.pack(offset, len(s))
            offset += len(s)
        return header + table + b"".join(sections)

    @staticmethod
    def sections(raw: bytes) -> dict:
        """Split a binary into its named sections (bytes), checking the header."""
        table_end = _HEADER.size + _SECTION.size * len(_SECTIONS)
        if len(raw) < _HEADER.size or raw[:4] != MAGIC:
            raise ValueError("not a Spyre binary (bad magic)")
        _, version, count = _HEADER.unpack_from(raw, 0)
        if version != isa.ISA_VERSION or count != len(_SECTIONS):
            raise ValueError(f"Spyre binary of ISA version {version}; this runtime reads version {isa.ISA_VERSION}")
        if len(raw) < table_end:
            raise ValueError("truncated Spyre binary (section table)")
        out = {}
        for i, name in enumerate(_SECTIONS):
            off, size = _SECTION.unpack_from(raw, _HEADER.size + i * _SECTION.size)
            if off < table_end or off + size > len(raw):
                raise ValueError(f"truncated or corrupt Spyre binary (section {name})")
            out[name] = raw[off:off + size]
        return out

    @staticmethod
    def decode(raw: bytes) -> "Program":
        try:
            return Program._decode(raw)
        except (struct.error, KeyError, TypeError, json.JSONDecodeError, UnicodeDecodeError, IndexError) as e:
            raise ValueError(f"corrupt Spyre binary: {e}") from None

    @staticmethod
    def _decode(raw: bytes) -> "Program":
        sec = Program.sections(raw)
        meta = json.loads(sec["meta"])
        n = len(sec["insns"]) // isa.INSN_BYTES
        locs = struct.unpack(f"<{n}i", sec["locs"])
        insns = []
        for i in range(n):
            insn = isa.decode_insn(sec["insns"], i * isa.INSN_BYTES)
            insn.loc = locs[i]
            insns.append(insn)
        consts = list(struct.unpack(f"<{len(sec['consts']) // 8}Q", sec["consts"]))
        dsz = isa.DESC_STRUCT.size
        descs = [isa.Descriptor.decode(sec["descs"], i * dsz) for i in range(len(sec["descs"]) // dsz)]
        return Program(meta["name"], insns, consts, descs, meta["strings"], [tuple(x) for x in meta["locs"]],
                       [ArgSpec(*a) for a in meta["args"]], meta["n_sregs"], meta["lx_bytes"],
                       [list(x) for x in meta.get("lx_profile", [])])

    # -- assembly -----------------------------------------------------------------------------
    def value_name(self, off: int) -> str:
        if off == isa.NONE:
            return "_"
        if off < self.sreg_bytes:
            return f"s{off // isa.SREG_BYTES}" if off % isa.SREG_BYTES == 0 else f"s@{off}"
        return f"x{off - self.sreg_bytes}"

    def to_asm(self) -> str:
        lines = [f".kernel {self.name}", f".sregs {self.n_sregs}", f".lx {self.lx_bytes}"]
        if self.lx_profile:  # LX bytes held by live tiles from each instruction on (the metrics card)
            lines.append(".lxlive " + " ".join(f"{i}:{b}" for i, b in self.lx_profile))
        for a in self.args:
            lines.append(f".arg {a.name} {a.kind} {a.dtype} {self.value_name(a.slot) if a.slot >= 0 else '_'}")
        for c in self.consts:
            lines.append(f".const 0x{c & 0xFFFFFFFFFFFFFFFF:016x}")
        for d in self.descs:
            strides = ", ".join(self.value_name(s[1]) if isinstance(s, tuple) else str(s) for s in d.strides)
            text = f".desc [{', '.join(map(str, d.shape))}] [{strides}]"
            if d.limits:
                text += " < [" + ", ".join("_" if lim is None else self.value_name(lim[1]) for lim in d.limits) + "]"
            lines.append(text)
        for s in self.strings:
            lines.append(f".string {json.dumps(s)}")
        for file, line, text in self.locs:
            lines.append(f".loc {json.dumps(file)} {line} {json.dumps(text)}")
        targets = {i.args[f] for i in self.insns for f, kind, _ in isa.OPCODE_BY_NAME[i.op].operands if kind == "l"}
        last_loc = None
        for idx, insn in enumerate(self.insns):
            label = f"L{idx}:" if idx in targets else ""
            text = f"{label:<7}{self._insn_asm(insn)}"
            if insn.loc >= 0:
                text += f" ;@{insn.loc}"
                if insn.loc != last_loc:  # the source line, once per run of instructions from it
                    file, line, src = self.locs[insn.loc]
                    text = f"{text:<64} # {file.rsplit('/', 1)[-1]}:{line}: {src.strip()}"
                last_loc = insn.loc
            lines.append(text)
        return "\n".join(lines) + "\n"

    def _insn_asm(self, insn: isa.Insn) -> str:
        opcode = isa.OPCODE_BY_NAME[insn.op]
        mnemonic = insn.op
        if opcode.unit not in ("control",) or insn.op in ("brz", "brnz", "print", "assert"):
            mnemonic += f".{insn.t}"
        if opcode.uses_t2:
            mnemonic += f".{insn.t2}"
        parts = []
        for fld, kind, _ in opcode.operands:
            v = insn.args.get(fld, isa.NONE if kind in isa.OPTIONAL_KINDS else 0)
            view = fld in isa.VIEW and insn.flags.get(isa.VIEW[fld].name, 0)
            parts.append(f"@v{v}" if view else self._operand_asm(kind, v))
        for fl in opcode.flags:
            v = insn.flags.get(fl.name, 0)
            if fl.name in (f.name for f in isa.VIEW.values()):
                continue  # shown as the operand's @v<k>
            if fl.enum:
                parts.append(f"{fl.name}={v if isinstance(v, str) else isa.enum_name(fl.enum, v)}")
            elif v:
                parts.append(f"{fl.name}={v}")
        return f"{mnemonic} {', '.join(parts)}".rstrip()

    def _operand_asm(self, kind: str, v: int) -> str:
        if kind in ("v", "v?", "s"):
            return self.value_name(v)
        if kind in ("w", "w?"):
            return "_" if v == isa.NONE else f"v{v}"
        return {"k": "k", "d": "d", "l": "L", "str": "str"}.get(kind, "") + str(v)


# -- assembler ------------------------------------------------------------------------------------
_VALUE = re.compile(r"^(s(\d+)|s@(\d+)|x(\d+)|_)$")


class AsmError(ValueError):
    pass


def parse_asm(text: str) -> Program:
    """Assemble the text `Program.to_asm` prints back into a Program."""
    prog = Program(name="")
    pending_args = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line, loc = _strip_comment(raw)
        if not line:
            continue
        try:
            if line.startswith("."):
                _directive(prog, line, pending_args)
            else:
                if re.match(r"^L\d+:", line):
                    line = line.split(":", 1)[1].strip()
                insn = _parse_insn(prog, line)
                insn.loc = loc
                prog.insns.append(insn)
        except (ValueError, KeyError, IndexError) as e:
            raise AsmError(f"line {lineno}: {e}: {raw.strip()!r}") from None
    for name, kind, dtype, slot in pending_args:
        prog.args.append(ArgSpec(name, kind, dtype, -1 if slot == "_" else _value(prog, slot)))
    return prog


def _strip_comment(raw: str):
    if raw.lstrip().startswith("."):
        return raw.strip(), -1
    raw = raw.split("#", 1)[0].rstrip()
    m = re.search(r" ;@(\d+)$", raw)
    if not m:
        return raw.strip(), -1
    return raw[:m.start()].strip(), int(m.group(1))


def _directive(prog: Program, line: str, pending_args: list):
    key, _, rest = line.partition(" ")
    if key == ".kernel":
        prog.name = rest.strip()
    elif key == ".sregs":
        prog.n_sregs = int(rest)
    elif key == ".lx":
        prog.lx_bytes = int(rest)
    elif key == ".lxlive":
        prog.lx_profile = [[int(x) for x in pair.split(":")] for pair in rest.split()]
    elif key == ".arg":
        pending_args.append(rest.split())
    elif key == ".const":
        prog.consts.append(int(rest, 16))
    elif key == ".desc":
        shape_txt, strides_txt, limits_txt = re.match(r"\[(.*?)\]\s*\[(.*?)\](?:\s*<\s*\[(.*?)\])?$", rest).groups()
        shape = tuple(int(x) for x in shape_txt.split(",") if x.strip())
        strides = tuple(("s" if x.strip().startswith("s") else "v", _value(prog, x.strip()))
                        if x.strip()[:1] in ("s", "x") else int(x) for x in strides_txt.split(",") if x.strip())
        limits = tuple(None if x.strip() == "_" else ("s", _value(prog, x.strip()))
                       for x in (limits_txt or "").split(",") if x.strip())
        prog.descs.append(isa.Descriptor(shape, strides, limits))
    elif key == ".string":
        prog.strings.append(json.loads(rest))
    elif key == ".loc":
        dec = json.JSONDecoder()
        file, end = dec.raw_decode(rest)
        line_no, _, text = rest[end:].strip().partition(" ")
        prog.locs.append((file, int(line_no), json.loads(text)))
    else:
        raise ValueError(f"unknown directive {key}")


def _value(prog: Program, tok: str) -> int:
    m = _VALUE.match(tok)
    if not m:
        raise ValueError(f"bad value operand {tok!r}")
    if tok == "_":
        return isa.NONE
    if m.group(2) is not None:
        return int(m.group(2)) * isa.SREG_BYTES
    if m.group(3) is not None:
        return int(m.group(3))
    return prog.sreg_bytes + int(m.group(4))


def _parse_insn(prog: Program, line: str) -> isa.Insn:
    mnemonic, _, rest = line.partition(" ")
    name, *types = mnemonic.split(".")
    opcode = isa.OPCODE_BY_NAME[name]
    toks = [t.strip() for t in rest.split(",")] if rest.strip() else []
    insn = isa.Insn(name)
    if types:
        insn.t = types[0]
    if opcode.uses_t2:
        insn.t2 = types[1]
    pos = [t for t in toks if "=" not in t]
    if len(pos) != len(opcode.operands):
        raise ValueError(f"{name} takes {len(opcode.operands)} operands, got {len(pos)}")
    for (fld, kind, _), tok in zip(opcode.operands, pos):
        if tok.startswith("@v") and fld in isa.VIEW:  # an operand through a view register
            insn.args[fld] = int(tok[2:])
            insn.flags[isa.VIEW[fld].name] = 1
        elif kind in ("w", "w?"):
            insn.args[fld] = isa.NONE if tok == "_" else int(tok.lstrip("v"))
        elif kind in ("v", "v?", "s"):
            insn.args[fld] = _value(prog, tok)
        else:
            insn.args[fld] = int(tok.lstrip("kdLstr") or 0)
    for tok in toks:
        if "=" in tok:
            k, v = tok.split("=", 1)
            fl = next(f for f in opcode.flags if f.name == k)
            insn.flags[k] = v if fl.enum else int(v)
    return insn
