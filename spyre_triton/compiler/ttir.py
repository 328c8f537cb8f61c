"""Parse the textual TTIR that Triton 3.7 prints into a small Python object model.

The input is what ``str(mod)`` prints after Triton's ``make_ttir`` stage (or before it): an MLIR
module with debug locations (``loc(...)`` trailers and ``#locN = loc(...)`` alias lines before and
after the module), SSA names taken from name locations (``%offsets_1``), custom-form ops
(``arith.addi %a, %b : i32``) and generic-form ops (``"tt.reduce"(%x) <{axis = 0 : i32}> ({...})``).

The parser is a small scanner (`_Scanner`: regex tokens read on demand, because MLIR's lexical
rules depend on context, e.g. ``128x64xf16`` inside ``tensor<>``) plus a recursive-descent parser
(`_Parser`).  Custom-form ops are not parsed with one grammar per op: every custom op is read as a
sequence of generic pieces (operands, keywords, ``key = value`` pairs, attribute dicts, strings,
symbols, literals, regions, and a type signature after ``:``), and a small data table (`_OPS`)
says, for the few ops that need it, which attribute a positional keyword/string/literal names and
how the result types follow from the signature.  Everything else takes the default rules.

A model compiles hundreds of kernels, so the common cases have shortcuts that give the same reading
(a test compares the two over the parser tests' corpus): types are cached by their text, a
``loc(#alias)`` seen before resolves in one step, and one regex reads the bodies that are only
keywords, operands, int attributes and types (``slt, %a, %b : T``) or a scalar or splat constant.
Anything a shortcut does not recognise goes to the general pieces.

Public API: `parse_module`, `parse_type`, `walk`, `format_location`, and the classes `Type`,
`DenseAttr`, `Location`, `Value`, `Operation`, `Block`, `Region`, `Function`, `Module`,
`TTIRParseError`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Iterator

from .. import isa

__all__ = [
    "Type", "DenseAttr", "Location", "Value", "Operation", "Block", "Region", "Function", "Module",
    "TTIRParseError", "parse_module", "parse_type", "walk", "format_location",
    "int_type", "float_type", "tensor_type", "ptr_type", "I1", "I32", "I64", "F32", "INDEX",
]


# ----------------------------------------------------------------------------------------------
# Types
# ----------------------------------------------------------------------------------------------

# Float formats by MLIR name: (exponent bits, mantissa bits, exponent bias, special-value style).
# The machine's float dtypes take theirs from isa.py; the others are MLIR types the compiler only parses.
# 'ieee': all-ones exponent is inf/nan; 'fn': only all-ones exponent+mantissa is nan, no inf;
# 'fnuz': the negative-zero pattern is the only nan, no inf; 'finite': no inf, no nan;
# 'e8m0': unsigned power of two, 0xFF is nan.
_MACHINE_FLOATS = {"f64": "f64", "f32": "f32", "f16": "f16", "bf16": "bf16", "f8E5M2": "f8e5m2",
                   "f8E4M3FN": "f8e4m3fn", "f8E4M3FNUZ": "f8e4m3fnuz", "f8E5M2FNUZ": "f8e5m2fnuz"}
_FLOAT_FORMATS = {
    **{mlir: (f.ebits, f.mbits, f.bias, f.style)
       for mlir, f in ((m, isa.DTYPE_BY_NAME[d].fmt) for m, d in _MACHINE_FLOATS.items())},
    "tf32": (8, 10, 127, "ieee"),
    "f8E4M3": (4, 3, 7, "ieee"),
    "f8E3M4": (3, 4, 3, "ieee"),
    "f8E4M3B11FNUZ": (4, 3, 11, "fnuz"),
    "f8E8M0FNU": (8, 0, 127, "e8m0"),
    "f6E2M3FN": (2, 3, 1, "finite"),
    "f6E3M2FN": (3, 2, 3, "finite"),
    "f4E2M1FN": (2, 1, 1, "finite"),
}
_FLOAT_WIDTHS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f80": 80, "f128": 128, "tf32": 19}
_SMALL_FLOAT = re.compile(r"f(\d+)E\d+M\d+[A-Z0-9]*\Z")
_INT_NAME = re.compile(r"(?:[su]?i)(\d+)\Z")


@dataclass(frozen=True)
class Type:
    """One class for every type.  Frozen, so types compare and hash structurally."""
    kind: str                    # 'int' | 'float' | 'index' | 'ptr' | 'tensor' | 'tensordesc' | 'none' | 'other'
    width: int = 0               # bit width for int/float; 64 for index
    name: str = ""               # 'i32', 'bf16', 'f8E4M3FN', 'index', ...; raw text for 'other'
    shape: tuple = ()            # tensor shape (tensordesc: block shape); -1 for a dynamic dim
    elem: "Type | None" = None   # tensor element / ptr pointee / tensordesc block element
    addrspace: int = 1           # ptr only
    encoding: str = ""           # raw text of a tensor encoding attribute (empty in TTIR)

    def __post_init__(self):
        # Fill the canonical name so that Type("int", 32) == I32.
        if not self.name and self.kind in ("int", "index", "none"):
            object.__setattr__(self, "name", f"i{self.width}" if self.kind == "int" else self.kind)
        if self.kind == "index" and not self.width:
            object.__setattr__(self, "width", 64)

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def is_ptr(self) -> bool:
        return self.kind == "ptr"

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_index(self) -> bool:
        return self.kind == "index"

    @property
    def is_tensordesc(self) -> bool:
        return self.kind == "tensordesc"

    @property
    def scalar(self) -> "Type":
        """The element type of a tensor; the type itself otherwise."""
        return self.elem if self.kind == "tensor" else self

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape) if self.kind in ("tensor", "tensordesc") else 1

    def with_elem(self, elem: "Type") -> "Type":
        """Same shape, other element type (a scalar stays a scalar)."""
        return replace(self, elem=elem) if self.kind == "tensor" else elem

    def __str__(self) -> str:
        if self.kind == "ptr":
            space = "" if self.addrspace == 1 else f", {self.addrspace}"
            return f"!tt.ptr<{self.elem}{space}>"
        if self.kind == "tensor":
            dims = "".join(("?" if d < 0 else str(d)) + "x" for d in self.shape)
            enc = f", {self.encoding}" if self.encoding else ""
            return f"tensor<{dims}{self.elem}{enc}>"
        if self.kind == "tensordesc":
            return f"!tt.tensordesc<{tensor_type(self.shape, self.elem)}>"
        return self.name

    def __repr__(self) -> str:
        return f"Type({self})"


def int_type(width: int, name: str = "") -> Type:
    return Type("int", width, name or f"i{width}")


def float_type(name: str) -> Type:
    m = _SMALL_FLOAT.match(name)
    return Type("float", int(m.group(1)) if m else _FLOAT_WIDTHS[name], name)


def tensor_type(shape, elem: Type, encoding: str = "") -> Type:
    return Type("tensor", shape=tuple(shape), elem=elem, encoding=encoding)


def ptr_type(elem: Type, addrspace: int = 1) -> Type:
    return Type("ptr", 64, elem=elem, addrspace=addrspace)


I1, I32, I64, F32 = int_type(1), int_type(32), int_type(64), float_type("f32")
INDEX = Type("index", 64, "index")
NONE = Type("none", 0, "none")


def _builtin_scalar_type(word: str) -> Type | None:
    """The type a bare word names (i32, bf16, f8E5M2, index, none), or None."""
    m = _INT_NAME.match(word)
    if m:
        return int_type(int(m.group(1)), word)
    if word in _FLOAT_WIDTHS or _SMALL_FLOAT.match(word):
        return float_type(word)
    if word == "index":
        return INDEX
    if word == "none":
        return NONE
    return None


# ----------------------------------------------------------------------------------------------
# Attribute values
# ----------------------------------------------------------------------------------------------

def _decode_float(bits: int, name: str) -> float:
    """Decode the bit pattern of a float of the named MLIR type (f32, bf16, f8E4M3FN, ...)."""
    e_bits, m_bits, bias, style = _FLOAT_FORMATS[name]
    if style == "e8m0":
        return math.nan if bits == 0xFF else math.ldexp(1.0, bits - bias)
    sign_bit = 1 << (e_bits + m_bits)
    sign = -1.0 if bits & sign_bit else 1.0
    exp = (bits >> m_bits) & ((1 << e_bits) - 1)
    man = bits & ((1 << m_bits) - 1)
    all_ones = (1 << e_bits) - 1
    if style == "fnuz" and bits == sign_bit:
        return math.nan
    if style == "ieee" and exp == all_ones:
        return sign * math.inf if man == 0 else math.nan
    if style == "fn" and exp == all_ones and man == (1 << m_bits) - 1:
        return math.nan
    if exp == 0:  # zero or subnormal
        return sign * math.ldexp(man, 1 - bias - m_bits)
    return sign * math.ldexp(man | (1 << m_bits), exp - bias - m_bits)


def _from_bits(bits: int, t: Type | None):
    """A raw bit pattern (hex literal or data blob element) as a value of scalar type t."""
    if t is None:
        return bits
    if t.kind == "float":
        return _decode_float(bits, t.name)
    if t.kind == "int":
        if t.width == 1:
            return bool(bits & 1)
        if not t.name.startswith("ui") and bits >= 1 << (t.width - 1):
            return bits - (1 << t.width)  # signless ints print as signed
    return bits


@dataclass(eq=False)
class DenseAttr:
    """``dense<...> : T``.  ``values`` is flat, and holds one value when the attribute is a splat."""
    values: list
    type: Type | None

    @property
    def is_splat(self) -> bool:
        return len(self.values) == 1

    @property
    def splat(self):
        """The single value of a splat (None if the attribute is not a splat)."""
        return self.values[0] if len(self.values) == 1 else None

    def to_list(self) -> list:
        """All values, a splat expanded to the number of elements of the type."""
        if self.is_splat and self.type is not None:
            return self.values * self.type.numel
        return list(self.values)

    def __repr__(self) -> str:
        shown = self.values if len(self.values) <= 8 else self.values[:8] + ["..."]
        return f"DenseAttr({shown}, {self.type})"


@dataclass
class _RawNumber:
    """A number literal whose meaning depends on a type that may come later (hex float bits)."""
    text: str

    def value(self, t: Type | None):
        if self.text.startswith("0x"):
            return _from_bits(int(self.text, 16), t)
        if (t is not None and t.kind == "float") or any(c in self.text for c in ".eE"):
            return float(self.text)
        return int(self.text)


@dataclass
class _RawDense:
    """The body of ``dense<...>`` before its type is known."""
    elems: list          # _RawNumber | bool | tuple (complex) for listed elements
    blob: bytes | None   # raw little-endian data from the dense<"0x..."> form

    def value(self, t: Type | None) -> DenseAttr:
        elem = t.scalar if t is not None and t.kind in ("tensor", "tensordesc") else t
        if self.blob is None:
            vals = [_resolve_literal(e, elem) if not isinstance(e, tuple)
                    else tuple(float(part.value(None)) for part in e) for e in self.elems]
            return DenseAttr(vals, t)
        width = elem.width if elem is not None and elem.width else 8
        size = max(1, (width + 7) // 8)
        vals = [_from_bits(int.from_bytes(self.blob[i:i + size], "little"), elem)
                for i in range(0, len(self.blob), size)]
        return DenseAttr(vals, t)


def _resolve_literal(raw, t: Type | None):
    return raw.value(t) if isinstance(raw, (_RawNumber, _RawDense)) else raw


# ----------------------------------------------------------------------------------------------
# IR object model
# ----------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Location:
    """The innermost file:line:col of a debug location.

    ``name`` comes from a NameLoc (``loc("offsets"(#loc4))``).  For a CallSiteLoc the position is
    the callee's and ``caller`` is the call site's Location (when the callee is unknown, the
    position is the caller's).  `outermost` follows the caller chain to the user's code.
    """
    file: str
    line: int
    col: int
    name: str | None = None
    caller: "Location | None" = None

    @property
    def outermost(self) -> "Location":
        loc = self
        while loc.caller is not None:
            loc = loc.caller
        return loc

    def __repr__(self) -> str:
        via = f" via {self.caller!r}" if self.caller else ""
        name = f" {self.name!r}" if self.name else ""
        return f"<Location {self.file}:{self.line}:{self.col}{name}{via}>"


def format_location(loc: Location | None, outermost: bool = False) -> str:
    """``file:line`` of a location (of its outermost caller with `outermost`), or '<unknown>'."""
    if loc is not None and outermost:
        loc = loc.outermost
    if loc is None or (not loc.file and not loc.name):
        return "<unknown>"
    return f"{loc.file}:{loc.line}" if loc.file else loc.name


@dataclass(eq=False)
class Value:
    """An SSA value: an op result or a block argument.  ``name`` is the printed name without '%'
    (results of a multi-result op ``%r:2`` are named 'r#0', 'r#1')."""
    name: str
    type: Type
    owner: "Operation | Block | None"
    index: int

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


@dataclass(eq=False)
class Operation:
    name: str
    operands: list = field(default_factory=list)
    results: list = field(default_factory=list)
    attrs: dict = field(default_factory=dict)
    regions: list = field(default_factory=list)
    loc: Location | None = None
    parent: "Block | None" = None
    # Branch targets (cf.br / cf.cond_br); their operands are also in `operands`.
    successors: list = field(default_factory=list)

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    @property
    def result(self) -> Value:
        """The single result."""
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results")
        return self.results[0]

    @property
    def parent_op(self) -> "Operation | None":
        region = self.parent.parent if self.parent else None
        return region.parent if region else None

    def __repr__(self) -> str:
        res = ", ".join(f"%{v.name}" for v in self.results)
        ops = ", ".join(f"%{v.name}" for v in self.operands)
        return f"<Operation {res + ' = ' if res else ''}{self.name} {ops}>"


@dataclass(eq=False)
class Block:
    args: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    parent: "Region | None" = None
    label: str = ""

    def __repr__(self) -> str:
        return f"<Block ^{self.label or '?'} args={self.args} ops={len(self.ops)}>"


@dataclass(eq=False)
class Region:
    blocks: list = field(default_factory=list)
    parent: Operation | None = None

    def __repr__(self) -> str:
        return f"<Region blocks={len(self.blocks)}>"


@dataclass(eq=False)
class Function:
    name: str
    args: list
    arg_attrs: list
    result_types: list
    body: Region
    attrs: dict
    visibility: str = "public"
    loc: Location | None = None

    def __repr__(self) -> str:
        return f"<Function {self.visibility} @{self.name}({', '.join(map(repr, self.args))})>"


@dataclass(eq=False)
class Module:
    functions: dict
    attrs: dict
    ops: list = field(default_factory=list)   # top-level ops other than functions (rare)

    @property
    def kernel(self) -> Function:
        """The entry point: the (first) public function."""
        for fn in self.functions.values():
            if fn.visibility == "public":
                return fn
        raise LookupError("module has no public function")


def walk(node) -> Iterator[Operation]:
    """All operations nested in an Operation (itself first), Region, Block, Function or Module,
    in textual (pre-)order."""
    if isinstance(node, Module):
        for fn in node.functions.values():
            yield from walk(fn.body)
        for op in node.ops:
            yield from walk(op)
    elif isinstance(node, Function):
        yield from walk(node.body)
    elif isinstance(node, Region):
        for block in node.blocks:
            yield from walk(block)
    elif isinstance(node, Block):
        for op in node.ops:
            yield from walk(op)
    elif isinstance(node, Operation):
        yield node
        for region in node.regions:
            yield from walk(region)
    else:
        raise TypeError(f"cannot walk {type(node).__name__}")


class TTIRParseError(Exception):
    """Malformed TTIR.  ``line``/``col`` are 1-based positions in the parsed text."""

    def __init__(self, msg: str, line: int = 0, col: int = 0, source_line: str = ""):
        self.msg, self.line, self.col, self.source_line = msg, line, col, source_line
        shown = source_line or "(end of text)"
        super().__init__(f"line {line}, column {col}: {msg}\n    {shown}\n    {' ' * (col - 1)}^")


# ----------------------------------------------------------------------------------------------
# The op table: the only per-op knowledge of the parser
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _OpSyntax:
    keywords: tuple = ()        # attribute names of the leading bare keywords, in order
    keyword_values: dict | None = None  # translation of those keywords' values
    enum_names: tuple = ()      # names of the first keyword's values, for the generic form's ints
    string: str = "value"       # attribute name of a bare string literal
    literal: str = "value"      # attribute name of a bare literal (number, dense<>, true)
    symbol: str = "callee"      # attribute name of a bare @symbol
    renames: tuple = ()         # (printed key, attribute name) for `key = value` pieces
    result: str = "default"     # how result types follow from the signature, see _RESULT_RULES
    stripped: tuple = ()        # kinds of types printed without their `!tt.` prefix: `<f16>`
    regions: int = 0            # pad the region list to this length (scf.if without else)
    terminator: str = ""        # the printer omits this terminator when it has no operands
    last_operand_to: int = -1   # printed last, but at this index in the op's operand list
    optional_after: tuple = ()  # operands that a marked optional operand may follow, in segment order


_AXES = {"x": 0, "y": 1, "z": 2}
_CMPI = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
_CMPF = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule",
         "une", "uno", "true")
_CACHE = (("cacheModifier", "cache"), ("evictionPolicy", "evict"))
_DEFAULT = _OpSyntax()
_OPS = {
    "arith.constant": _OpSyntax(result="literal"),
    "arith.cmpi": _OpSyntax(keywords=("predicate",), result="i1", enum_names=_CMPI),
    "arith.cmpf": _OpSyntax(keywords=("predicate",), result="i1", enum_names=_CMPF),
    "arith.select": _OpSyntax(result="last"),
    "tt.get_program_id": _OpSyntax(keywords=("axis",), keyword_values=_AXES),
    "tt.get_num_programs": _OpSyntax(keywords=("axis",), keyword_values=_AXES),
    "tt.load": _OpSyntax(renames=_CACHE, result="pointee"),
    "tt.store": _OpSyntax(renames=_CACHE),
    "tt.descriptor_load": _OpSyntax(renames=_CACHE),
    "tt.atomic_rmw": _OpSyntax(keywords=("atomic_rmw_op", "sem", "scope")),
    "tt.atomic_cas": _OpSyntax(keywords=("sem", "scope")),
    "tt.descriptor_store": _OpSyntax(last_operand_to=1),     # `%desc[%i, %j], %src`
    "tt.descriptor_reduce": _OpSyntax(keywords=("kind",), last_operand_to=1),
    "tt.dot_scaled": _OpSyntax(renames=(("lhs", "a_elem_type"), ("rhs", "b_elem_type")), optional_after=(0, 1)),
    "tt.unsplat": _OpSyntax(result="scalar"),
    "tt.print": _OpSyntax(string="prefix"),
    "tt.assert": _OpSyntax(string="message"),
    "tt.elementwise_inline_asm": _OpSyntax(string="asm_string"),
    "tt.make_tensor_ptr": _OpSyntax(stripped=("ptr",)),
    "tt.advance": _OpSyntax(stripped=("ptr",)),
    "tt.make_tensor_descriptor": _OpSyntax(stripped=("ptr", "tensordesc"), result="last"),
    "ttg.barrier": _OpSyntax(keywords=("addrSpace",)),
    "scf.for": _OpSyntax(terminator="scf.yield"),
    "scf.if": _OpSyntax(regions=2, terminator="scf.yield"),
}

# Bare words that only structure a custom form (scf.for / scf.if / scf.while, `attributes {..}`
# before an attribute dictionary); they carry no attribute.
_STRUCTURAL = {"to", "step", "iter_args", "else", "do", "attributes"}
# Words that mark the next operand as an optional one, which comes after the others in the
# operand list (tt.dot_scaled: `%a scale %as, %b scale %bs, %c` -> a, b, c, as, bs).
_OPERAND_MARKERS = {"scale"}
# `word<...>` pieces of custom forms that are attributes: word -> attribute name.
_ANGLE_ATTRS = {"fastmath": "fastmath", "overflow": "overflowFlags"}
# bare words that are not keyword pieces of a custom form
_NOT_KEYWORDS = _STRUCTURAL | _OPERAND_MARKERS | {"true", "false"}


def _rule_default(sig_in, sig_out, literal, n):
    types = sig_out if sig_out is not None else sig_in[:1]
    if len(types) == n:
        return types
    if len(types) == 1:   # tt.split: `: T -> T2` gives both results T2
        return types * n
    return None


def _rule_i1(sig_in, sig_out, literal, n):
    return [sig_in[0].with_elem(I1)] * n if sig_in else None


def _rule_pointee(sig_in, sig_out, literal, n):
    """tt.load: tensor<Nx!tt.ptr<T>> -> tensor<NxT>; !tt.ptr<T> -> T; !tt.ptr<tensor<..>> -> tensor."""
    if not sig_in or sig_in[0].scalar.kind != "ptr":
        return None
    return [sig_in[0].with_elem(sig_in[0].scalar.elem)] * n


def _rule_literal(sig_in, sig_out, literal, n):
    if sig_in:
        return sig_in[:1] * n
    return [I1] * n if isinstance(literal, bool) else None


_RESULT_RULES = {
    "default": _rule_default,
    "i1": _rule_i1,
    "pointee": _rule_pointee,
    "literal": _rule_literal,
    "last": lambda sig_in, sig_out, literal, n: sig_in[-1:] * n if sig_in else None,
    "scalar": lambda sig_in, sig_out, literal, n: [sig_in[0].scalar] * n if sig_in else None,
}


# ----------------------------------------------------------------------------------------------
# Scanner
# ----------------------------------------------------------------------------------------------

_WS = re.compile(r"(?:\s+|//[^\n]*)+")
_INLINE_WS = re.compile(r"(?:[ \t\r\f]+|//[^\n]*)+")     # stops at a newline
# the characters either can start with: what \s matches (Unicode whitespace ends at U+3000) and the / of a comment
_WS_START = frozenset(c for c in map(chr, range(0x3001)) if re.match(r"\s", c)) | {"/"}
_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_SUFFIX_ID = r"[A-Za-z0-9_$.\-]+"
_SSA_USE = re.compile(rf"%({_SUFFIX_ID})(?:#(\d+))?")
_SSA_DEF = re.compile(rf"%({_SUFFIX_ID})(?::(\d+))?")
_CARET_ID = re.compile(rf"\^({_SUFFIX_ID})")
_ALIAS_REF = re.compile(rf"[#!]({_SUFFIX_ID})")
_LOC_ALIAS_USE = re.compile(rf"loc\((#{_SUFFIX_ID})\)")
# The text of a tensor or pointer type, up to three levels of <>, with no attribute alias (#...) in it:
# `tensor<1024x!tt.ptr<f32>>`. A model's kernels spell the same few dozen types thousands of times.
_TYPE_TEXT_RE = r"(?:tensor|!tt\.ptr)<(?:[^<>#]|<(?:[^<>#]|<[^<>#]*>)*>)*>"
_TYPE_TEXT = re.compile(_TYPE_TEXT_RE)
# The body of most custom-form operations: bare keywords and operands, then types (`slt, %a, %b : T`,
# `%p, %o : T1, T2`, `%x : T1 -> T2`) and nothing else before the location. Anything else in it (an
# attribute, a literal, a region, a result index) makes the match fail, and the general parser reads it.
_SIMPLE_TYPE = rf"(?:[a-z][A-Za-z0-9]*|{_TYPE_TEXT_RE})"
_INT_ATTR = r"[A-Za-z_][A-Za-z0-9_]* = -?\d+ : i\d+"  # `axis = 1 : i32`: the value is the int
_SIMPLE_BODY = re.compile(rf"[ \t]+([^:{{}}\[\]()\"@#=<>!\n]*?)[ \t]*(?:\{{({_INT_ATTR}(?:, {_INT_ATTR})*)\}}[ \t]*)?"
                          rf": ({_SIMPLE_TYPE}(?:, {_SIMPLE_TYPE})*)"
                          rf"(?: -> ({_SIMPLE_TYPE}(?:, {_SIMPLE_TYPE})*))?(?=[ \t]*(?:loc\(|$))", re.M)
# arith.constant's usual bodies: `15 : i32`, `true : i1`, `dense<0.000000e+00> : tensor<128xf32>`
_NUMBER_TEXT = r"0x[0-9A-Fa-f]+|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"
_CONSTANT_BODY = re.compile(rf"[ \t]+(?:(dense<)?({_NUMBER_TEXT}|true|false)(?(1)>)) : ({_SIMPLE_TYPE})"
                            rf"(?=[ \t]*(?:loc\(|$))", re.M)
_SIMPLE_OPERAND = re.compile(rf"%({_SUFFIX_ID})\Z")
_SIMPLE_KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*\Z")
_TYPE_CACHE: dict[str, "Type"] = {}  # type text -> Type (frozen, so shared); texts naming no type alias
_TYPE_CACHE_MAX = 4096
_NUMBER = re.compile(_NUMBER_TEXT)
# a string body as runs of plain characters between escapes, possessive: no backtracking through a long path
_STRING_BODY = r'([^"\\\n]*+(?:\\.[^"\\\n]*+)*+)'
_STRING = re.compile(rf'"{_STRING_BODY}"')
_SYMBOL = re.compile(rf'@(?:({_SUFFIX_ID})|"{_STRING_BODY}")')
_FILE_LOC = re.compile(rf'loc\("{_STRING_BODY}":(\d+):(\d+)\)')              # `loc("k.py":12:7)`
_NAMED_ALIAS_LOC = re.compile(rf'loc\("{_STRING_BODY}"\((#{_SUFFIX_ID})\)\)')  # `loc("x"(#loc3))`
_DIM = re.compile(r"(\d+|\?)x")
_FILE_LINE_COL = re.compile(r":(\d+):(\d+)(?:\s+to\s+(?:\d+)?:\d+)?")
_ALIAS_DEF = re.compile(rf"^([#!]{_SUFFIX_ID})[ \t]*=[ \t]*", re.M)
_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{2}|.)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def _unescape(body: str) -> str:
    r"""MLIR string escapes: \\, \", \n, \t and \XX (two hex digits, a raw byte)."""
    if "\\" not in body:
        return body
    out = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(body):
        out += body[pos:m.start()].encode()
        esc = m.group(1)
        out += bytes([int(esc, 16)]) if len(esc) == 2 else _ESCAPES.get(esc, esc).encode()
        pos = m.end()
    out += body[pos:].encode()
    return out.decode("utf-8", errors="backslashreplace")


class _Scanner:
    """Position-based access to the text: tokens are matched on demand at the current position."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, msg: str, pos: int | None = None) -> TTIRParseError:
        pos = self.pos if pos is None else pos
        line_start = self.text.rfind("\n", 0, pos) + 1
        line_end = self.text.find("\n", pos)
        line_end = len(self.text) if line_end < 0 else line_end
        line = self.text.count("\n", 0, pos) + 1
        return TTIRParseError(msg, line, pos - line_start + 1, self.text[line_start:line_end])

    def expected(self, what: str) -> TTIRParseError:
        got = self.text[self.pos:self.pos + 20].split("\n")[0]
        return self.error(f"expected {what}, got {got!r}" if got else f"expected {what}, got end of text")

    # The scanning primitives run hundreds of thousands of times per model: each first looks at the next
    # character, and only where whitespace or a comment can start does it run the regular expression.
    def skip(self) -> None:
        """Skip whitespace (including newlines) and comments."""
        self.pos = self._after_ws()

    def skip_inline(self) -> None:
        """Skip spaces and comments but stop at a newline (which ends an operation)."""
        if self.text[self.pos:self.pos + 1] in _WS_START:
            m = _INLINE_WS.match(self.text, self.pos)
            if m:
                self.pos = m.end()

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos:self.pos + n]

    def at_op_end(self) -> bool:
        return self.pos >= len(self.text) or self.text[self.pos] in "\n}"

    def _after_ws(self) -> int:
        pos = self.pos
        if self.text[pos:pos + 1] not in _WS_START:
            return pos
        m = _WS.match(self.text, pos)
        return m.end() if m else pos

    # accept/match leave the position alone when they fail: a newline they would have skipped
    # may be the end of the current operation.
    def accept(self, s: str) -> bool:
        """Consume `s` (after whitespace) if it is next."""
        pos = self._after_ws()
        if self.text.startswith(s, pos):
            self.pos = pos + len(s)
            return True
        return False

    def accept_word(self, word: str) -> bool:
        m = _BARE_ID.match(self.text, self._after_ws())
        if m and m.group() == word:
            self.pos = m.end()
            return True
        return False

    def expect(self, s: str, what: str | None = None) -> None:
        if not self.accept(s):
            raise self.expected(what or repr(s))

    def match(self, regex: re.Pattern, what: str | None = None):
        """Match `regex` at the current position (after whitespace); consume it."""
        m = regex.match(self.text, self._after_ws())
        if m:
            self.pos = m.end()
        elif what:
            self.skip()
            raise self.expected(what)
        return m

    def bare_id(self, what: str = "an identifier") -> str:
        return self.match(_BARE_ID, what).group()

    def string(self) -> str:
        return _unescape(self.match(_STRING, "a string").group(1))

    def starts_word(self, word: str) -> bool:
        """Is `word` (as a whole identifier) next, without consuming it?"""
        m = _BARE_ID.match(self.text, self.pos)
        return bool(m) and m.group() == word

    def skip_balanced(self) -> None:
        """Skip one bracketed group starting at the current `<`, `(`, `[` or `{`."""
        pairs = {"<": ">", "(": ")", "[": "]", "{": "}"}
        stack = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == '"':
                self.match(_STRING, "a string")
                continue
            if ch == "-" and self.peek(2) == "->":
                self.pos += 2
                continue
            if ch in pairs:
                stack.append(pairs[ch])
            elif stack and ch == stack[-1]:
                stack.pop()
                if not stack:
                    self.pos += 1
                    return
            self.pos += 1
        raise self.error("unbalanced brackets")


# ----------------------------------------------------------------------------------------------
# Parser
# ----------------------------------------------------------------------------------------------

class _Custom:
    """The pieces of one custom-form operation, in order of appearance."""

    def __init__(self):
        self.operands: list[Value] = []
        self.keywords: list[str] = []
        self.attrs: dict = {}
        self.strings: list[str] = []
        self.symbols: list[str] = []
        self.literals: list = []
        self.marked: list[Value] = []                 # operands after a marker word
        self.marked_after: list[int] = []             # for each, the index of the operand it follows
        self.marker = False                           # the next operand follows a marker
        self.bindings: list[tuple[str, Value]] = []   # `%name = %init`: entry block arguments
        self.sig_in: list = []                        # types after `:` (before any `->`/`to`)
        self.sig_out: list | None = None              # types after `->` / `to`


@dataclass
class _Stripped:
    """A dialect type printed without its prefix (`<tensor<64x64xf16>>`); the op table names it."""
    inner: Type
    addrspace: int


@dataclass
class _Scope:
    """The names visible in one region, plus forward references waiting for a definition."""
    names: dict = field(default_factory=dict)
    pending: list = field(default_factory=list)      # (placeholder Value, key, position)


class _Parser(_Scanner):
    def __init__(self, text: str):
        super().__init__(text)
        # Alias definitions (`#loc3 = loc(...)`, `!t = ...`) may come after their uses, so their
        # positions are collected up front and their values parsed lazily, when first used.
        self.alias_pos = {m.group(1): m.end() for m in _ALIAS_DEF.finditer(text)}
        self.alias_cache: dict = {}
        self.scopes: list[_Scope] = []
        self.forward: dict = {}   # placeholder Value -> the Value it turned out to be

    # ---- module / functions ------------------------------------------------------------------

    def parse_module(self) -> Module:
        module = Module({}, {})
        self.skip_alias_lines()
        if self.accept_word("module"):
            self.match(_SYMBOL)    # optional module name
            if self.accept_word("attributes"):
                module.attrs = self.attr_dict()
            self.expect("{", "'{' opening the module body")
            self.module_body(module, closing="}")
            self.expect("}", "'}' closing the module")
            self.optional_loc()
        else:   # a bare list of functions without the module wrapper
            self.module_body(module, closing="")
        self.skip_alias_lines()
        self.skip()
        if self.pos < len(self.text):
            raise self.expected("end of text")
        return module

    def skip_alias_lines(self) -> None:
        while True:
            self.skip()
            m = _ALIAS_DEF.match(self.text, self.pos)
            if not m:
                return
            end = self.text.find("\n", self.pos)
            self.pos = len(self.text) if end < 0 else end

    def module_body(self, module: Module, closing: str) -> None:
        while True:
            self.skip_alias_lines()
            if self.pos >= len(self.text) or (closing and self.peek() == closing):
                return
            if self.starts_word("tt.func") or self.starts_word("func.func"):
                fn = self.function()
                if fn.name in module.functions:
                    raise self.error(f"redefinition of function @{fn.name}")
                module.functions[fn.name] = fn
            else:
                self.scopes, self.forward = [_Scope()], {}
                op = self.operation(None)
                self.close_isolated(op)
                module.ops.append(op)

    def function(self) -> Function:
        self.bare_id()
        self.skip()
        visibility = "public"
        for vis in ("public", "private", "nested"):
            if self.accept_word(vis):
                visibility = vis
        name = self.symbol()
        self.scopes = [_Scope()]    # functions are isolated from above: fresh names
        self.forward = {}
        arg_specs, arg_attrs = self.function_args()
        result_types = self.function_results()
        attrs = self.attr_dict() if self.accept_word("attributes") else {}
        self.skip_inline()
        if self.peek() == "{":
            if any(n is None for n, _ in arg_specs):
                raise self.error(f"@{name} has a body, so its arguments need names")
            body = self.region(None, arg_specs)
            args = body.blocks[0].args if body.blocks else []
        else:   # a declaration: no body
            body = Region([], None)
            args = [Value(n or f"arg{i}", t, None, i) for i, (n, t) in enumerate(arg_specs)]
        self.close_isolated(body)
        loc = self.optional_loc()
        return Function(name, args, arg_attrs, result_types, body, attrs, visibility, loc)

    def function_args(self):
        """`(%a: T {attrs} loc(..), ...)`, or `(T, T)` for a declaration."""
        specs, attrs = [], []
        self.expect("(", "'(' opening the argument list")
        while not self.accept(")"):
            if specs:
                self.expect(",", "',' or ')' in the argument list")
            self.skip()
            name = None
            if self.peek() == "%":
                name = self.match(_SSA_DEF, "an argument name").group(1)
                self.expect(":", "':' after the argument name")
            t = self.type()
            arg_attr = {}
            self.skip()
            if self.peek() == "{":
                arg_attr = self.attr_dict()
            self.optional_loc()
            specs.append((name, t))
            attrs.append(arg_attr)
        return specs, attrs

    def function_results(self) -> list:
        if not self.accept("->"):
            return []
        self.skip()
        if self.peek() != "(":
            return [self.type()]
        self.pos += 1
        types = []
        while not self.accept(")"):
            if types:
                self.expect(",", "',' or ')' in the result list")
            types.append(self.type())
            self.skip()
            if self.peek() == "{":
                self.attr_dict()   # result attributes: not modelled
        return types

    def close_isolated(self, root) -> None:
        """End of a function (or top-level op): report names used but never defined, and replace
        the placeholders of forward references by the values defined later."""
        scope = self.scopes[0]
        if scope.pending:
            _, key, pos = scope.pending[0]
            raise self.error(f"use of undefined value %{_key_text(key)}", pos)
        if self.forward:
            for op in walk(root):
                op.operands = [self.forward.get(v, v) for v in op.operands]

    # ---- regions, blocks, operations ---------------------------------------------------------

    def region(self, parent: Operation | None, entry_args) -> Region:
        """`{ ops... ^bb1(...): ops... }`.  entry_args: (name, type) pairs of an unlabelled entry
        block (function arguments, scf.for induction variable and iter_args); a list (possibly
        empty) also gives an empty `{ }` its entry block, as custom forms elide a lone terminator.
        None (generic form): an empty `{ }` has no blocks."""
        self.expect("{", "'{' opening a region")
        region = Region([], parent)
        self.scopes.append(_Scope())
        labels: dict[str, Block] = {}
        branches: list[Operation] = []     # ops whose successor labels await resolution
        self.skip()
        if self.peek() != "^" and (self.peek() != "}" or entry_args is not None):
            self.new_block(region, entry_args or [], "")
        while True:
            self.skip()
            if self.accept("}"):
                break
            if self.pos >= len(self.text):
                raise self.expected("'}' closing a region")
            if self.peek() == "^":
                label, args = self.block_label()
                if label in labels:
                    raise self.error(f"redefinition of block ^{label}")
                labels[label] = self.new_block(region, args, label)
                continue
            op = self.operation(region.blocks[-1])
            region.blocks[-1].ops.append(op)
            if op.successors:
                branches.append(op)
        for op in branches:
            op.successors = [self.block_for(labels, label, pos) for label, pos in op.successors]
        self.close_scope()
        return region

    def block_for(self, labels, label, pos) -> Block:
        if label not in labels:
            raise self.error(f"reference to undefined block ^{label}", pos)
        return labels[label]

    def new_block(self, region: Region, arg_specs, label: str) -> Block:
        block = Block([], [], region, label)
        for i, (name, t) in enumerate(arg_specs):
            value = Value(name, t, block, i)
            self.define(name, value)
            block.args.append(value)
        region.blocks.append(block)
        return block

    def block_label(self):
        """`^bb0(%a: f32 loc(...), %b: f32):`"""
        label = self.match(_CARET_ID, "a block label").group(1)
        args = []
        if self.accept("("):
            while not self.accept(")"):
                if args:
                    self.expect(",", "',' or ')' in the block argument list")
                name = self.match(_SSA_DEF, "a block argument").group(1)
                self.expect(":", "':' after the block argument name")
                args.append((name, self.type()))
                self.optional_loc()
        self.expect(":", "':' after the block label")
        return label, args

    def operation(self, block: Block | None) -> Operation:
        self.skip()
        start = self.pos
        names = self.result_names()
        self.skip()
        op = Operation("", parent=block)
        if self.peek() == '"':
            op.name = self.string()
            result_types = self.generic_body(op)
        else:
            op.name = self.match(_BARE_ID, "an operation name").group()
            result_types = self.custom_body(op, len(names))
        if len(result_types) != len(names):
            raise self.error(f"{op.name} has {len(names)} result names but {len(result_types)} "
                             "result types", start)
        op.results = [Value(n, t, op, i) for i, (n, t) in enumerate(zip(names, result_types))]
        for value in op.results:
            self.define(value.name, value)
        op.loc = self.optional_loc()
        _add_implicit_terminators(op)
        self.skip_inline()
        if not self.at_op_end():
            raise self.expected(f"end of the {op.name} operation")
        return op

    def result_names(self) -> list[str]:
        """`%a, %b = ` or `%r:2 = ` (named r#0, r#1), or nothing."""
        if self.peek() != "%":
            return []
        names = []
        while True:
            m = self.match(_SSA_DEF, "a result name")
            if m.group(2) is None:
                names.append(m.group(1))
            else:
                names.extend(f"{m.group(1)}#{i}" for i in range(int(m.group(2))))
            if not self.accept(","):
                break
        self.expect("=", "'=' after the result names")
        return names

    # ---- generic form ------------------------------------------------------------------------

    def generic_body(self, op: Operation) -> list:
        """`(%a, %b) [^succ] <{props}> ({regions}) {attrs} : (T, T) -> (T)`"""
        self.expect("(", "'(' opening the operand list")
        while not self.accept(")"):
            if op.operands:
                self.expect(",", "',' or ')' in the operand list")
            op.operands.append(self.use())
        if self.accept("["):
            while not self.accept("]"):
                self.accept(",")
                self.successor(op, op.operands)
        if self.accept("<"):
            op.attrs.update(self.attr_dict())
            self.expect(">", "'>' closing the properties")
        self.skip()
        if self.peek() == "(":
            self.pos += 1
            while not self.accept(")"):
                if op.regions:
                    self.expect(",", "',' or ')' in the region list")
                self.skip()
                op.regions.append(self.region(op, None))
        self.skip()
        if self.peek() == "{":
            op.attrs.update(self.attr_dict())
        syntax = _OPS.get(op.name, _DEFAULT)
        if syntax.enum_names:   # `predicate = 2 : i64` -> 'slt', as in the custom form
            key = syntax.keywords[0]
            value = op.attrs.get(key)
            if isinstance(value, int) and 0 <= value < len(syntax.enum_names):
                op.attrs[key] = syntax.enum_names[value]
        self.expect(":", "':' before the operation's function type")
        self.paren_types()
        self.expect("->", "'->' in the function type")
        return self.result_type_list()

    # ---- custom form -------------------------------------------------------------------------

    def custom_body(self, op: Operation, n_results: int) -> list:
        syntax = _OPS.get(op.name, _DEFAULT)
        c = self.constant_body() if op.name == "arith.constant" else self.simple_body()
        if c is None:
            c = self.general_body(op)
        self.finish_custom(op, c, syntax)
        if n_results == 0:
            return []
        literal = c.literals[0] if c.literals else None
        kinds = iter(syntax.stripped)
        sig_in = [_unstrip(t, kinds) for t in c.sig_in]
        sig_out = None if c.sig_out is None else [_unstrip(t, kinds) for t in c.sig_out]
        types = _RESULT_RULES[syntax.result](sig_in, sig_out, literal, n_results)
        if not types or any(not isinstance(t, Type) for t in types):
            raise self.error(f"cannot tell the result types of {op.name} from its signature")
        if syntax.result == "literal" and "value" in op.attrs:
            op.attrs["value"] = _resolve_literal(literal, types[0])
        return types

    def simple_body(self) -> _Custom | None:
        """The pieces of a body that _SIMPLE_BODY matches, each type seen before: the general parser's
        reading of it, without its piece-by-piece scanning. None: read it the general way."""
        m = _SIMPLE_BODY.match(self.text, self.pos)
        if not m:
            return None
        c = _Custom()
        pre, attrs, sig_in, sig_out = m.groups()
        if attrs:
            for item in attrs.split(", "):
                name, rest = item.split(" = ")
                c.attrs[name] = int(rest.split(" : ")[0])
        uses = []
        if pre:
            start = m.start(1)
            for piece in pre.split(", "):
                u = _SIMPLE_OPERAND.match(piece)
                if u:
                    uses.append((u.group(1), start))
                elif uses or not _SIMPLE_KEYWORD.match(piece) or piece in _NOT_KEYWORDS:
                    return None   # a keyword after an operand, a number, a marker, a flag...
                else:
                    c.keywords.append(piece)
                start += len(piece) + 2
        c.sig_in = _known_types(sig_in)
        if c.sig_in is None:
            return None
        if sig_out is not None:
            c.sig_out = _known_types(sig_out)
            if c.sig_out is None:
                return None
        c.operands = [self.use_of(name, None, start) for name, start in uses]
        self.pos = m.end()
        return c

    def constant_body(self) -> _Custom | None:
        """A scalar or splat constant whose type was seen before, read as general_body would."""
        m = _CONSTANT_BODY.match(self.text, self.pos)
        if not m:
            return None
        types = _known_types(m.group(3))
        if types is None:
            return None
        c = _Custom()
        word = m.group(2)
        value = word == "true" if word in ("true", "false") else _RawNumber(word)
        c.literals.append(_RawDense([value], None) if m.group(1) else value)
        c.sig_in = types
        self.pos = m.end()
        return c

    def general_body(self, op: Operation) -> _Custom:
        c = _Custom()
        in_types = False    # after a `:`, pieces are types (tt.print also puts operands there)
        while True:
            self.skip_inline()
            if self.at_op_end() or self.starts_loc():
                break
            ch = self.peek()
            if ch == ":":
                self.pos += 1
                in_types = True
            elif ch == "," or (ch == "*" and in_types):
                self.pos += 1
            elif self.peek(2) == "->" or (in_types and self.starts_word("to")):
                self.pos += 2
                c.sig_out = self.result_type_list()
            elif ch == "{":
                if self.brace_opens_region():
                    # `%iv = %lb`, `iter_args(%a = %init)`: the entry block's arguments
                    args = [(name, init.type) for name, init in c.bindings] if not op.regions else []
                    op.regions.append(self.region(op, args))
                    in_types = False
                else:
                    c.attrs.update(self.attr_dict())
            elif in_types:
                self.type_piece(c)
            else:
                self.piece(c, op)
        return c

    def type_piece(self, c: _Custom) -> None:
        ch = self.peek()
        if ch == "%":
            c.operands.append(self.use())
        elif ch == "(":
            c.sig_in.extend(self.paren_types())
        elif ch == "<":
            c.sig_in.append(self.stripped_type())
        else:
            c.sig_in.append(self.type())

    def piece(self, c: _Custom, op: Operation) -> None:
        """One piece before the `:` of a custom form (also used inside `[...]` and `(...)`)."""
        ch = self.peek()
        if not ch:
            raise self.expected("an operand, keyword or attribute")
        if ch == "%":
            m = _SSA_USE.match(self.text, self.pos)
            after = _INLINE_WS.match(self.text, m.end()) if m else None
            after = after.end() if after else (m.end() if m else self.pos)
            if m and m.group(2) is None and self.text.startswith("=", after) \
                    and not self.text.startswith("==", after):
                self.pos = after + 1          # `%iv = %lb`: %iv names an entry block argument
                init = self.use()
                c.bindings.append((m.group(1), init))
                c.operands.append(init)
            elif c.marker:
                c.marked_after.append(len(c.operands) - 1)
                c.marked.append(self.use())
                c.marker = False
            else:
                c.operands.append(self.use())
        elif ch == "^":
            self.successor(op, c.operands)
        elif ch in "[(":
            close = "]" if ch == "[" else ")"
            self.pos += 1
            while not self.accept(close):
                self.skip()
                if self.peek() == ",":
                    self.pos += 1
                    continue
                self.piece(c, op)
        elif ch == '"':
            c.strings.append(self.string())
        elif ch == "@":
            c.symbols.append(self.symbol())
        elif ch == "#":
            c.literals.append(self.attr_value())
        elif _NUMBER.match(self.text, self.pos):
            c.literals.append(_RawNumber(self.match(_NUMBER).group()))
        else:
            self.word_piece(c)

    def word_piece(self, c: _Custom) -> None:
        word = self.bare_id("an operand, keyword or attribute")
        if self.peek() == "<":
            if word in _ANGLE_ATTRS:      # fastmath<fast>, overflow<nsw>
                c.attrs[_ANGLE_ATTRS[word]] = self.angle_text()
            else:                          # dense<...>, array<...>, ...
                c.literals.append(self.word_attr(word, defer_type=True))
            return
        self.skip_inline()
        if self.peek() == "=" and self.peek(2) != "==":
            self.pos += 1
            c.attrs[word] = self.attr_value(custom=True)
        elif word in ("true", "false"):
            c.literals.append(word == "true")
        elif word in _OPERAND_MARKERS:
            c.marker = True
        elif word not in _STRUCTURAL:
            while self.accept("|"):        # bit-enum keywords: local|global_read
                word += "|" + self.bare_id()
            c.keywords.append(word)

    def finish_custom(self, op: Operation, c: _Custom, syntax: _OpSyntax) -> None:
        """Name the positional pieces through the op table; the rest take default names."""
        op.operands = c.operands + c.marked
        if syntax.optional_after:  # whose the marked operands are, as the generic form says it
            attrs_seg = (1,) * len(c.operands) + tuple(int(i in c.marked_after) for i in syntax.optional_after)
            op.attrs["operandSegmentSizes"] = attrs_seg
        if syntax.last_operand_to >= 0 and op.operands:
            op.operands.insert(syntax.last_operand_to, op.operands.pop())
        attrs = {}
        for kw_name, kw in zip(syntax.keywords, c.keywords):
            values = syntax.keyword_values or {}
            attrs[kw_name] = values.get(kw, kw)
        for flag in c.keywords[len(syntax.keywords):]:
            attrs[flag] = True             # allow_reorder, efficient_layout, ...
        if c.strings:
            attrs[syntax.string] = c.strings[0] if len(c.strings) == 1 else c.strings
        if c.symbols:
            attrs[syntax.symbol] = c.symbols[0] if len(c.symbols) == 1 else c.symbols
        if c.literals:
            attrs[syntax.literal] = _resolve_literal(c.literals[0], None)
        renames = dict(syntax.renames)
        for key, value in c.attrs.items():
            attrs[renames.get(key, key)] = value
        op.attrs.update(attrs)
        while len(op.regions) < syntax.regions:
            op.regions.append(Region([], op))

    def brace_opens_region(self) -> bool:
        """A `{` opens a region if a newline, a block label or an operation follows it; otherwise
        it opens an attribute dictionary.  (The printer puts a region's contents on new lines.)"""
        m = _INLINE_WS.match(self.text, self.pos + 1)
        nxt = m.end() if m else self.pos + 1
        return nxt >= len(self.text) or self.text[nxt] in "\n^%"

    def starts_loc(self) -> bool:
        return self.text.startswith("loc(", self.pos)

    def successor(self, op: Operation, operands: list) -> None:
        """`^bb2` or `^bb2(%v, %w : f32, f32)`; the operands join the op's operands."""
        pos = self.pos
        label = self.match(_CARET_ID, "a block label").group(1)
        op.successors.append((label, pos))
        self.skip_inline()
        if self.peek() == "(":
            self.pos += 1
            while not self.accept(":"):
                self.accept(",")
                operands.append(self.use())
            self.paren_tail_types()

    def paren_tail_types(self) -> list:
        types = []
        while not self.accept(")"):
            if types:
                self.expect(",", "',' or ')'")
            types.append(self.type())
        return types

    # ---- names -------------------------------------------------------------------------------

    def define(self, name: str, value: Value) -> None:
        scope = self.scopes[-1]
        base, _, idx = name.partition("#")
        if idx:   # a result of `%r:N`: registered as the group `r`, indexable with `%r#i`
            if idx == "0" and base in scope.names:
                raise self.error(f"redefinition of value %{base}")
            scope.names.setdefault(base, []).append(value)
            return
        if name in scope.names:
            raise self.error(f"redefinition of value %{name}")
        scope.names[name] = value

    def lookup(self, key) -> Value | None:
        name, idx = key
        for scope in reversed(self.scopes):
            entry = scope.names.get(name)
            if entry is None:
                continue
            if isinstance(entry, list):
                return entry[idx or 0] if (idx or 0) < len(entry) else None
            return entry if not idx else None
        return None

    def use(self) -> Value:
        """A value use `%x` or `%r#1`.  An unknown name becomes a placeholder that must be defined
        later in an enclosing region (MLIR allows this across blocks)."""
        start = self._after_ws()
        m = self.match(_SSA_USE, "a value (%name)")
        return self.use_of(m.group(1), int(m.group(2)) if m.group(2) else None, start)

    def use_of(self, name: str, idx: int | None, start: int) -> Value:
        key = (name, idx)
        value = self.lookup(key)
        if value is None:
            value = Value(_key_text(key), Type("other", name="<unresolved>"), None, -1)
            self.scopes[-1].pending.append((value, key, start))
        return value

    def close_scope(self) -> None:
        """Leave a region: resolve forward references defined in it, pass the others outward."""
        scope = self.scopes.pop()
        still = []
        for placeholder, key, pos in scope.pending:
            self.scopes.append(scope)
            value = self.lookup(key)
            self.scopes.pop()
            if value is None:
                still.append((placeholder, key, pos))
            else:
                self.forward[placeholder] = value
        if not self.scopes:
            return
        self.scopes[-1].pending.extend(still)

    # ---- types -------------------------------------------------------------------------------

    def type(self) -> Type:
        self.skip()
        start = self.pos
        ch = self.peek()
        if ch == "t" or ch == "!":
            m = _TYPE_TEXT.match(self.text, start)
            if m:
                return self.cached_type(m)
        if ch == "!":
            return self.dialect_type()
        if ch == "(":   # a function type used as a type: kept as text
            self.paren_types()
            if self.accept("->"):   # several results are parenthesized
                self.skip()
                self.paren_types() if self.peek() == "(" else self.type()
            return Type("other", name=self.text[start:self.pos])
        word = self.bare_id("a type")
        scalar = _builtin_scalar_type(word)
        if scalar is not None:
            return scalar
        if word == "tensor":
            return self.tensor_body()
        if self.peek() == "<":   # vector<..>, tuple<..>, complex<..>, memref<..>: kept as text
            self.skip_balanced()
        return Type("other", name=self.text[start:self.pos])

    def cached_type(self, m: re.Match) -> Type:
        """The type whose text `m` matched: parsed once per distinct text. A text in which some `!` is not
        `!tt.ptr<` may name a type alias of this module, so it is parsed every time."""
        text = m.group()
        hit = _TYPE_CACHE.get(text)
        if hit is not None:
            self.pos = m.end()
            return hit
        t = self.dialect_type() if text[0] == "!" else self.uncached_tensor()
        if self.pos == m.end() and text.count("!") == text.count("!tt.ptr<"):
            if len(_TYPE_CACHE) >= _TYPE_CACHE_MAX:
                _TYPE_CACHE.clear()
            _TYPE_CACHE[text] = t
        return t

    def uncached_tensor(self) -> Type:
        self.bare_id("a type")
        return self.tensor_body()

    def tensor_body(self) -> Type:
        self.expect("<")
        dims = []
        while True:
            m = _DIM.match(self.text, self.pos)
            if not m:
                break
            dims.append(-1 if m.group(1) == "?" else int(m.group(1)))
            self.pos = m.end()
        elem = self.type()
        encoding = ""
        if self.accept(","):
            self.skip()
            start = self.pos
            self.attr_value()
            encoding = self.text[start:self.pos]
        self.expect(">", "'>' closing the tensor type")
        return tensor_type(dims, elem, encoding)

    def dialect_type(self) -> Type:
        start = self.pos
        m = self.match(_ALIAS_REF, "a type")
        name = m.group(1)
        if name == "tt.ptr":
            self.expect("<")
            stripped = self.ptr_params()
            return ptr_type(stripped.inner, stripped.addrspace)
        if name == "tt.tensordesc":
            self.expect("<")
            block = self.type()
            if self.accept(","):   # layout parameters (not in TTIR)
                self.skip()
                self.attr_value()
            self.expect(">", "'>' closing the tensordesc type")
            return Type("tensordesc", shape=block.shape, elem=block.elem)
        if self.peek() == "<":
            self.skip_balanced()
            return Type("other", name=self.text[start:self.pos])
        if "!" + name in self.alias_pos:
            return self.alias("!" + name, self.type)
        return Type("other", name=self.text[start:self.pos])

    def ptr_params(self) -> _Stripped:
        """`pointee [, addrspace]>` after `!tt.ptr<` or a stripped `<`."""
        inner = self.type()
        space = int(self.match(_NUMBER, "an address space").group()) if self.accept(",") else 1
        self.expect(">", "'>' closing the pointer type")
        return _Stripped(inner, space)

    def stripped_type(self) -> _Stripped:
        self.expect("<")
        return self.ptr_params()

    def paren_types(self) -> list:
        self.expect("(", "'(' opening a type list")
        return self.paren_tail_types()

    def result_type_list(self) -> list:
        """Types after `->` or `to`: `T`, `T1, T2` or `(T1, T2)`."""
        self.skip()
        if self.peek() == "(":
            return self.paren_types()
        types = [self.type()]
        while True:
            self.skip_inline()
            if self.peek() != ",":
                return types
            self.pos += 1
            types.append(self.type())

    # ---- attributes --------------------------------------------------------------------------

    def attr_dict(self) -> dict:
        """`{name = value, flag, "quoted name" = value}`; a flag without value is True (unit)."""
        self.expect("{", "'{' opening an attribute dictionary")
        attrs = {}
        while not self.accept("}"):
            if attrs:
                self.expect(",", "',' or '}' in an attribute dictionary")
            self.skip()
            key = self.string() if self.peek() == '"' else self.bare_id("an attribute name")
            attrs[key] = self.attr_value() if self.accept("=") else True
        return attrs

    def attr_value(self, custom: bool = False, defer_type: bool = False):
        """One attribute value.  `custom`: inside a custom form, where a bare word is an enum
        keyword (`rounding = rtne`) and no `: type` suffix follows.  `defer_type`: keep number and
        dense literals raw, their type comes from the op's signature."""
        self.skip()
        ch = self.peek()
        if not ch:
            raise self.expected("an attribute value")
        if ch == '"':
            return self.string()
        if ch == "@":
            return self.symbol()
        if ch == "[":
            self.pos += 1
            items = []
            while not self.accept("]"):
                if items:
                    self.expect(",", "',' or ']' in an array attribute")
                items.append(self.attr_value(custom))
            return items
        if ch == "{":
            return self.attr_dict()
        if ch == "#":
            return self.hash_attr()
        if ch in "!(":
            return self.type()
        if _NUMBER.match(self.text, self.pos):
            return self.typed_literal(_RawNumber(self.match(_NUMBER).group()), custom, defer_type)
        return self.word_attr(self.bare_id("an attribute value"), custom, defer_type)

    def word_attr(self, word: str, custom: bool = False, defer_type: bool = False):
        """The rest of an attribute value that starts with the bare word `word` (consumed)."""
        if word in ("true", "false"):
            return word == "true"
        if word == "unit":
            return True
        if word == "dense" and self.peek() == "<":
            return self.typed_literal(self.dense_body(), custom, defer_type)
        if word == "array" and self.peek() == "<":
            return self.array_body()
        if self.peek() == "<":    # fastmath<fast>, affine_map<...>, ...: the text inside
            return self.angle_text()
        if not custom:
            t = _builtin_scalar_type(word)
            if t is not None:
                return t
            if word == "tensor":
                return self.tensor_body()
        return word   # an enum keyword

    def typed_literal(self, raw, custom: bool, defer: bool):
        """`value [: type]`.  In a custom form a `:` belongs to the op's signature instead, and
        a deferred literal stays raw until that signature gives its type."""
        if defer:
            return raw
        t = self.type() if not custom and self.accept(":") else None
        return _resolve_literal(raw, t)

    def dense_body(self) -> _RawDense:
        """`<0xFF800000>`, `<1.0>`, `<[[1, 2], [3, 4]]>`, `<"0x0000803F...">`, `<true>`."""
        self.expect("<")
        self.skip()
        if self.peek() == '"':
            data = self.string()
            self.expect(">", "'>' closing dense<>")
            try:
                return _RawDense([], bytes.fromhex(data[2:]))
            except ValueError:
                raise self.error("malformed hex data in dense<>") from None
        elems: list = []
        self.dense_elems(elems)
        self.expect(">", "'>' closing dense<>")
        return _RawDense(elems, None)

    def dense_elems(self, out: list) -> None:
        self.skip()
        if self.peek() == ">":
            return
        if self.accept("["):
            first = True
            while not self.accept("]"):
                if not first:
                    self.expect(",", "',' or ']' in dense<>")
                first = False
                self.dense_elems(out)
            return
        if self.accept("("):      # complex: (re, im)
            re_, _, im = self.dense_scalar(), self.expect(","), self.dense_scalar()
            self.expect(")")
            out.append((re_, im))
            return
        out.append(self.dense_scalar())

    def dense_scalar(self):
        if self.accept_word("true"):
            return True
        if self.accept_word("false"):
            return False
        return _RawNumber(self.match(_NUMBER, "a number in dense<>").group())

    def array_body(self) -> tuple:
        """`array<i32: 1, 0>` -> (1, 0)."""
        self.expect("<")
        t = self.type()
        values = []
        if self.accept(":"):
            while True:
                values.append(self.dense_scalar())
                if not self.accept(","):
                    break
        self.expect(">", "'>' closing array<>")
        return tuple(_resolve_literal(v, t) for v in values)

    def angle_text(self) -> str:
        """The text between balanced `<` `>` (for attributes not modelled further)."""
        start = self.pos
        self.skip_balanced()
        return self.text[start + 1:self.pos - 1].strip()

    def hash_attr(self):
        """`#alias` or `#dialect.attr<...>` / `#dialect<...>`."""
        start = self.pos
        name = self.match(_ALIAS_REF, "an attribute alias").group()
        if self.peek() == "<":
            return self.angle_text()
        if name in self.alias_pos:
            return self.alias(name, self.attr_value)
        return self.text[start:self.pos]

    def symbol(self) -> str:
        m = self.match(_SYMBOL, "a symbol (@name)")
        return m.group(1) if m.group(1) is not None else _unescape(m.group(2))

    # ---- locations ---------------------------------------------------------------------------

    def optional_loc(self) -> Location | None:
        self.skip_inline()
        if not self.starts_loc():
            return None
        m = _LOC_ALIAS_USE.match(self.text, self.pos)   # `loc(#loc12)`, the usual form, seen before
        if m:
            hit = self.alias_cache.get(m.group(1))
            if hit is not None and hit is not _IN_PROGRESS:
                self.pos = m.end()
                return hit
        # the two forms of the alias definitions Triton prints, in one step each
        m = _FILE_LOC.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return Location(_unescape(m.group(1)), int(m.group(2)), int(m.group(3)))
        m = _NAMED_ALIAS_LOC.match(self.text, self.pos)
        if m and m.group(2) in self.alias_pos:
            inner = self.alias(m.group(2), self.optional_loc)
            self.pos = m.end()
            return _named(inner, _unescape(m.group(1)))
        self.pos += len("loc(")
        loc = self.loc_body()
        self.expect(")", "')' closing loc(")
        return loc

    def loc_body(self) -> Location | None:
        """unknown | #alias | "file":L:C | "name"(inner) | "name" | callsite(a at b) | fused[...]"""
        self.skip()
        ch = self.peek()
        if ch == "#":
            name = self.match(_ALIAS_REF, "a location alias").group()
            if name not in self.alias_pos:
                raise self.error(f"undefined location alias {name}")
            return self.alias(name, self.optional_loc)
        if ch == '"':
            text = self.string()
            m = _FILE_LINE_COL.match(self.text, self.pos)
            if m:
                self.pos = m.end()
                return Location(text, int(m.group(1)), int(m.group(2)))
            if self.accept("("):
                inner = self.loc_body()
                self.expect(")", "')' closing a name location")
                return _named(inner, text)
            return Location("", 0, 0, text)
        word = self.bare_id("a location")
        if word == "unknown":
            return None
        if word == "callsite":
            return self.callsite()
        if word == "fused":
            return self.fused()
        raise self.error(f"unknown location kind {word!r}")

    def callsite(self) -> Location | None:
        self.expect("(")
        callee = self.loc_body()
        if not self.accept_word("at"):
            raise self.expected("'at' in callsite(...)")
        caller = self.loc_body()
        self.expect(")", "')' closing callsite(")
        if callee is None or not callee.file:
            if caller is None:
                return callee
            name = callee.name if callee and callee.name else caller.name
            return replace(caller, name=name)
        return replace(callee, name=callee.name or (caller.name if caller else None), caller=caller)

    def fused(self) -> Location | None:
        """fused[a, b] or fused<metadata>[a, b]: the first known location."""
        self.skip()
        if self.peek() == "<":
            self.skip_balanced()
        self.expect("[")
        locs = []
        while not self.accept("]"):
            if locs:
                self.expect(",", "',' or ']' in fused[...]")
            locs.append(self.loc_body())
        return next((loc for loc in locs if loc is not None), None)

    def alias(self, name: str, parse):
        """The value of an alias, parsed (once) at its definition with `parse`."""
        if name in self.alias_cache:
            value = self.alias_cache[name]
            if value is _IN_PROGRESS:
                raise self.error(f"alias {name} refers to itself")
            return value
        self.alias_cache[name] = _IN_PROGRESS
        saved = self.pos
        self.pos = self.alias_pos[name]
        try:
            value = parse()
        finally:
            self.pos = saved
        self.alias_cache[name] = value
        return value


_IN_PROGRESS = object()


def _known_types(texts: str) -> list | None:
    """The types of a comma-separated list of type texts, each a builtin scalar or already in the type
    cache; None if one is not."""
    out = []
    for text in texts.split(", "):
        t = _TYPE_CACHE.get(text) or _builtin_scalar_type(text)
        if t is None:
            return None
        out.append(t)
    return out


def _named(inner: Location | None, name: str) -> Location:
    """A NameLoc: the inner location's position under the given name."""
    if inner is None:
        return Location("", 0, 0, name)
    return Location(inner.file, inner.line, inner.col, name, inner.caller)


def _add_implicit_terminators(op: Operation) -> None:
    """Put back the operand-less `scf.yield` the printer leaves out of scf.for / scf.if bodies."""
    name = _OPS.get(op.name, _DEFAULT).terminator
    if not name:
        return
    for region in op.regions:
        if len(region.blocks) == 1:
            block = region.blocks[0]
            if not block.ops or block.ops[-1].name != name:
                block.ops.append(Operation(name, loc=op.loc, parent=block))


def _unstrip(t, kinds: Iterator[str]):
    """Give a prefix-less dialect type (`<f16>`) the next kind the op table lists (default ptr)."""
    if not isinstance(t, _Stripped):
        return t
    if next(kinds, "ptr") == "tensordesc":
        return Type("tensordesc", shape=t.inner.shape, elem=t.inner.elem)
    return ptr_type(t.inner, t.addrspace)


def _key_text(key) -> str:
    name, idx = key
    return name if idx is None else f"{name}#{idx}"


# ----------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------

def parse_module(text: str) -> Module:
    """Parse the text of a TTIR module (as printed by ``str(mod)``)."""
    return _Parser(text).parse_module()


def parse_type(text: str) -> Type:
    """Parse one type, e.g. ``tensor<128x!tt.ptr<f16>>``."""
    parser = _Parser(text)
    t = parser.type()
    parser.skip()
    if parser.pos < len(text):
        raise parser.expected("end of the type")
    return t
