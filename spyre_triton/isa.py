"""The Spyre instruction set: the one table everything else is derived from.

The encoder and decoder below, the assembler and disassembler (`spyre_triton.asm`), the C
interpreter's opcode header (`runtime/isa_gen.h`) and the reference (`docs/isa.md`) all come from
the tables in this file; `python -m spyre_triton.isa_gen` regenerates the generated files and a
test checks that the checked-in copies are current.

The machine, per core (see docs/isa.md for the whole story):
- an *arena* of bytes holding the scalar register file (8-byte slots `s0, s1, ...` at the start)
  followed by the LX scratchpad, where tiles live (`x<byte offset into LX>`);
- value operands are arena byte offsets, so a tile, a sub-tile (offset into a tile) and a scalar
  register are all the same kind of operand. Elementwise instructions take a *broadcast* flag per
  source: a broadcast source is read as one element for every lane (a scalar register, or a
  one-element tile), which is how `splat` costs nothing;
- tiles are dense and row-major; each instruction works on `n` elements of one dtype;
- a DMA engine moves tiles between device memory and LX through descriptors (shape and byte
  strides, constant or from scalar registers), with an optional per-element mask and fill value;
  gather/scatter take a tile of 64-bit addresses for irregular access;
- a PE array does matmul-accumulate on tiles, an SFU does transcendental functions;
- scalar control flow: branches on scalar registers, program id and grid registers.

An instruction is 32 bytes: u16 opcode, u8 dtype `t`, u8 dtype `t2`, u32 flags, six u32 operand
fields (a, b, c, d, e, n). Which fields an opcode uses, and what its flag bits mean, is in OPCODES.

Float results are the same bits whichever host CPU runs the interpreter (its baseline, AVX2 and
AVX-512 builds agree; nothing is fused unless the instruction is `fma`). NaN payloads included:
`add`, `sub`, `mul`, `divf`, `fma`, `maximumf` and `minimumf` with NaN operands give the first NaN
operand, quieted; a rounding to f16 keeps a NaN's top payload bits; a float `red` (add, mul,
maximum, minimum) whose result is NaN gives the default NaN (on x86: sign set, quiet, payload 0).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

ISA_VERSION = 7  # 2: descriptors carry ld/st bounds; 3: per-dimension offset vectors; 4: view registers;
#                  5: dot operands through view registers that hold strided rows; 6: red's float order
#                  over RED_LANES = 64 partial results (was 32); 7: DMA instructions name their base argument
INSN_BYTES = 32
# The spyrebin container (spyre_triton.asm writes it, runtime/loader.c reads it): the magic, then the
# ISA version, the section count and an (offset, size) pair per section, in this order
BINARY_MAGIC = b"SPYB"
BINARY_SECTIONS = ("insns", "consts", "descs", "locs", "meta")
INSN_STRUCT = struct.Struct("<HBBI6I")
NONE = 0xFFFFFFFF  # an absent optional operand (no mask, no fill value)
MAX_RANK = 6  # dimensions a DMA or tile-copy descriptor can describe
SREG_BYTES = 8  # one scalar register slot
SREGS_MAX = 16384  # scalar register slots per core
LX_BYTES_MAX = 2 << 20  # the LX scratchpad per core
MAX_CORES = 32  # simulated cores (host worker threads) per device
# partial results a float sum or product over a contiguous row keeps (red's fixed order, below): four
# AVX-512 (eight AVX2) vectors of independent accumulators, enough to hide a vector add's latency
RED_LANES = 64


# ---------------------------------------------------------------------------------------------
# Data types. `code` is what the instruction's t/t2 byte holds. i1 is stored as one byte (0/1);
# pointers are i64 device addresses. Integers are signless: signedness is the opcode's.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FloatFormat:
    """A binary float format: sign bit, `ebits` exponent bits with bias `bias`, `mbits` mantissa bits.
    `style` says what the all-ones exponent and the negative-zero pattern mean:
    'ieee': all-ones exponent is inf (mantissa 0) or NaN, subnormals below the smallest exponent;
    'fn': finite, only all-ones exponent and mantissa is NaN (the largest value is one step below);
    'fnuz': finite, unsigned zero: the negative-zero pattern is the only NaN;
    'dl': IBM's DLFloat: no subnormals (exponent and mantissa zero is zero; exponent zero with a nonzero
    mantissa is a normal number), all-ones exponent and mantissa is the one special value, NaN and
    infinity alike (it reads back as NaN)."""
    ebits: int
    mbits: int
    bias: int
    style: str  # 'ieee' | 'fn' | 'fnuz' | 'dl'

    @property
    def quiet_nan(self) -> int:
        """The bits of the positive quiet NaN with no payload (ieee formats)."""
        return (((1 << self.ebits) - 1) << self.mbits) | (1 << (self.mbits - 1))


FLOAT_STYLES = ("ieee", "fn", "fnuz", "dl")

# IBM's DLFloat16 (Agrawal et al., "DLFloat: A 16-b Floating Point Format Designed for Deep Learning
# Training and Inference", ARITH 2019; IBM onnx-mlir's NNP1 class and zDNN call it DLFLOAT16 /
# "NNP-data-format 1", torch-spyre SEN169_FP16): the format a Spyre card keeps torch.float16 data in.
# It is not a dtype of the ISA (the instructions say f16); SPYRE_NUMERICS=dl16 rounds f16 values
# through it where the card would (docs/numerics.md). Conversions from f32 round to nearest with ties
# away from zero, as IBM's conversions do (onnx-mlir DLF16Conversion.hpp, zDNN convert.c).
DL16 = FloatFormat(6, 9, 31, "dl")

# Numerics modes (SPYRE_NUMERICS, spyre_triton.numerics.mode): how the simulated card represents f16.
NUMERICS_MODES = {
    "ieee": "f16 is IEEE binary16 everywhere (the default)",
    "dl16": "f16 values round through DLFloat16 where the card converts them: host-to-device copies, "
            "vector and SFU results and the loads that read f16 tiles, the PE array's f16 operands and "
            "f16 results, and its accumulator of fp8 products (docs/numerics.md)",
}


@dataclass(frozen=True)
class DType:
    code: int
    name: str
    nbytes: int
    kind: str  # 'int' | 'float'
    ctype: str  # the C storage type
    doc: str
    fmt: FloatFormat | None = None  # floats: the bit layout
    pe_rate: float = 1.0  # dot inputs of this dtype: PE array throughput relative to f16
    dot_out: tuple = ()  # the result dtypes of a dot whose inputs have this dtype (none: no dot takes it)


# the dot's results for inputs it multiplies in f32 (f16, bf16, f32, fp8): the accumulator rounded to these
_F32_COMPUTE = ("f32", "f16", "bf16")
DTYPES = [
    DType(0, "i1", 1, "int", "uint8_t", "boolean, one byte holding 0 or 1"),
    DType(1, "i8", 1, "int", "int8_t", "8-bit integer", pe_rate=2.0, dot_out=("i32",)),
    DType(2, "i16", 2, "int", "int16_t", "16-bit integer"),
    DType(3, "i32", 4, "int", "int32_t", "32-bit integer"),
    DType(4, "i64", 8, "int", "int64_t", "64-bit integer; also device addresses"),
    DType(5, "f16", 2, "float", "uint16_t", "IEEE binary16 (arithmetic rounds through f32)", FloatFormat(5, 10, 15, "ieee"),
          dot_out=_F32_COMPUTE),
    DType(6, "bf16", 2, "float", "uint16_t", "bfloat16 (arithmetic rounds through f32)", FloatFormat(8, 7, 127, "ieee"),
          dot_out=_F32_COMPUTE),
    DType(7, "f32", 4, "float", "float", "IEEE binary32", FloatFormat(8, 23, 127, "ieee"), pe_rate=0.25,
          dot_out=_F32_COMPUTE),
    DType(8, "f64", 8, "float", "double", "IEEE binary64", FloatFormat(11, 52, 1023, "ieee"), pe_rate=1.0 / 16,
          dot_out=("f64",)),
    DType(9, "f8e4m3fn", 1, "float", "uint8_t", "fp8 e4m3, finite, no infinities (OCP)", FloatFormat(4, 3, 7, "fn"), 2.0,
          _F32_COMPUTE),
    DType(10, "f8e5m2", 1, "float", "uint8_t", "fp8 e5m2 (OCP)", FloatFormat(5, 2, 15, "ieee"), 2.0, _F32_COMPUTE),
    DType(11, "f8e4m3fnuz", 1, "float", "uint8_t", "fp8 e4m3, finite, unsigned zero", FloatFormat(4, 3, 8, "fnuz"), 2.0,
          _F32_COMPUTE),
    DType(12, "f8e5m2fnuz", 1, "float", "uint8_t", "fp8 e5m2, finite, unsigned zero", FloatFormat(5, 2, 16, "fnuz"), 2.0,
          _F32_COMPUTE),
    DType(13, "f8e4m3b15", 1, "float", "uint8_t", "fp8 e4m3 with exponent bias 15", FloatFormat(4, 3, 15, "fn"), 2.0,
          _F32_COMPUTE),
]
# the fp8 dtypes, in code order: the C runtime indexes its fp8 tables by dtype code - the first's code
FP8_DTYPES = [d for d in DTYPES if d.kind == "float" and d.nbytes == 1]
assert [d.code for d in FP8_DTYPES] == list(range(FP8_DTYPES[0].code, FP8_DTYPES[0].code + len(FP8_DTYPES)))
DTYPE_BY_NAME = {d.name: d for d in DTYPES}
DTYPE_BY_CODE = {d.code: d for d in DTYPES}


# ---------------------------------------------------------------------------------------------
# Enumerations used in flag fields.
# ---------------------------------------------------------------------------------------------
ENUMS: dict[str, list[tuple[str, str]]] = {
    # integer comparison (arith.cmpi)
    "icmp": [("eq", "=="), ("ne", "!="), ("slt", "signed <"), ("sle", "signed <="), ("sgt", "signed >"),
             ("sge", "signed >="), ("ult", "unsigned <"), ("ule", "unsigned <="), ("ugt", "unsigned >"),
             ("uge", "unsigned >=")],
    # float comparison (arith.cmpf): o* are false when either side is NaN, u* are true
    "fcmp": [("false", "always false"), ("oeq", "ordered =="), ("ogt", "ordered >"), ("oge", "ordered >="),
             ("olt", "ordered <"), ("ole", "ordered <="), ("one", "ordered !="), ("ord", "neither is NaN"),
             ("ueq", "unordered or =="), ("ugt", "unordered or >"), ("uge", "unordered or >="),
             ("ult", "unordered or <"), ("ule", "unordered or <="), ("une", "unordered or !="),
             ("uno", "either is NaN"), ("true", "always true")],
    # conversions (CVT): what converts t2 (source) to t (destination)
    "cvt": [("sext", "sign-extend or truncate an integer (to i1: the low bit)"),
            ("zext", "zero-extend or truncate an integer (to i1: the low bit; from i1: 0 or 1)"),
            ("sitofp", "signed integer to float"), ("uitofp", "unsigned integer to float"),
            ("fptosi", "float to signed integer, toward zero (NaN gives 0, out of range saturates)"),
            ("fptoui", "float to unsigned integer, toward zero (NaN gives 0, out of range saturates)"),
            ("fpext", "float to wider float, exact"),
            ("rtne", "float to float, round to nearest even"), ("rtz", "float to float, round toward zero"),
            ("bool", "any to i1: nonzero is 1")],
    # built-in reductions (RED); NaN rules follow arith.maxnumf / arith.maximumf
    "red": [("add", "sum"), ("mul", "product"), ("maxs", "signed max"), ("mins", "signed min"),
            ("maxu", "unsigned max"), ("minu", "unsigned min"), ("maxnum", "float max ignoring NaN"),
            ("minnum", "float min ignoring NaN"), ("maximum", "float max propagating NaN"),
            ("minimum", "float min propagating NaN"), ("and", "bitwise and"), ("or", "bitwise or"),
            ("xor", "bitwise xor")],
    # atomic read-modify-write (ATOM)
    "atom": [("add", "integer add"), ("fadd", "float add"), ("max", "signed max"), ("min", "signed min"),
             ("umax", "unsigned max"), ("umin", "unsigned min"), ("and", "bitwise and"), ("or", "bitwise or"),
             ("xor", "bitwise xor"), ("xchg", "exchange")],
    # the two operations of a binchain (op1 then op2)
    "binchain": [(f"{a}_{b}", f"(x {sa} y) {sb} z") for a, sa in (("add", "+"), ("sub", "-"), ("mul", "*"))
                 for b, sb in (("add", "+"), ("sub", "-"), ("mul", "*"))],
    # elementwise SFU functions of one float argument (MATH1)
    "math1": [("exp", "e^x"), ("exp2", "2^x"), ("log", "natural log"), ("log2", "log base 2"),
              ("log10", "log base 10"), ("log1p", "log(1+x)"), ("expm1", "e^x - 1"), ("sqrt", "square root"),
              ("rsqrt", "1/sqrt(x)"), ("cbrt", "cube root"), ("sin", "sine"), ("cos", "cosine"), ("tan", "tangent"),
              ("asin", "arc sine"), ("acos", "arc cosine"), ("atan", "arc tangent"), ("sinh", "hyperbolic sine"),
              ("cosh", "hyperbolic cosine"), ("tanh", "hyperbolic tangent"), ("asinh", "inverse sinh"),
              ("acosh", "inverse cosh"), ("atanh", "inverse tanh"), ("erf", "error function"),
              ("erfc", "complementary error function"), ("erfinv", "inverse error function"),
              ("lgamma", "log gamma"), ("tgamma", "gamma"), ("floor", "round down"), ("ceil", "round up"),
              ("trunc", "round toward zero"), ("round", "round half away from zero"),
              ("rint", "round half to even"), ("abs", "absolute value"), ("neg", "negate"),
              ("rcp", "1/x"), ("signbit", "1.0 if the sign bit is set else 0.0"),
              ("isnan", "1.0 if NaN else 0.0"), ("isinf", "1.0 if infinite else 0.0"),
              ("isfinite", "1.0 if finite else 0.0"), ("j0", "Bessel J0"), ("j1", "Bessel J1"),
              ("y0", "Bessel Y0"), ("y1", "Bessel Y1"), ("normcdf", "standard normal CDF"),
              ("normcdfinv", "inverse standard normal CDF"), ("exp10", "10^x"), ("sinpi", "sin(pi x)"),
              ("cospi", "cos(pi x)"), ("nearbyint", "round to integer in the current mode")],
    # elementwise SFU functions of two float arguments (MATH2)
    "math2": [("pow", "a^b"), ("atan2", "atan(a/b) with quadrant"), ("fmod", "C fmod (sign of a)"),
              ("remainder", "IEEE remainder"), ("hypot", "sqrt(a^2+b^2)"), ("copysign", "|a| with the sign of b"),
              ("fdim", "max(a-b, 0)"), ("nextafter", "next float after a toward b"),
              ("ldexp", "a * 2^b (b integral)"), ("fmaxnum", "max ignoring NaN"), ("fminnum", "min ignoring NaN")],
}


def enum_value(enum: str, name: str) -> int:
    for i, (n, _) in enumerate(ENUMS[enum]):
        if n == name:
            return i
    raise KeyError(f"{name!r} is not a member of the {enum} enumeration")


def enum_name(enum: str, value: int) -> str:
    return ENUMS[enum][value][0]


# ---------------------------------------------------------------------------------------------
# Operand kinds (what an operand field holds) and flag fields.
# ---------------------------------------------------------------------------------------------
OPERAND_KINDS = {
    "v": "value: arena byte offset of a tile, sub-tile or scalar register",
    "v?": "optional value (NONE when absent)",
    "s": "scalar register: arena byte offset of an 8-byte slot",
    "u": "unsigned 32-bit immediate",
    "k": "index into the constant pool (64-bit raw bit patterns)",
    "d": "index into the descriptor table",
    "l": "label: index of the target instruction",
    "str": "index into the string table",
    "w": "view register index; see VIEW_DOC",
    "w?": "optional view register index (NONE when absent)",
}


OPTIONAL_KINDS = ("v?", "w?")


@dataclass(frozen=True)
class Flag:
    name: str
    shift: int
    bits: int
    enum: str | None = None  # an ENUMS key, or None for a plain integer

    @property
    def mask(self) -> int:
        return ((1 << self.bits) - 1) << self.shift


# Broadcast bits of elementwise instructions: bcN set means source operand N (counting after dst; it
# sits in field b, c or d) is read as one element for every lane.
BCAST = [None, Flag("bc1", 1, 1), Flag("bc2", 2, 1), Flag("bc3", 3, 1)]

# View bits: `v<field>` set means the operand in that field is a view register index (asm `@v<k>`), and
# the operand is read (or, for a destination, written) at the address the view register holds.
VIEW = {f: Flag(f"v{f}", shift, 1) for f, shift in zip("abcd", (24, 25, 26, 27))}
MAX_VIEWS = 256

# The base argument of a device-memory access: which pointer argument of the kernel its addresses derive
# from, so that the access is checked against that argument's allocation and cannot reach a neighbour.
BASE_ARG = Flag("arg", 12, 12)
BASE_ARG_DOC = (
    "Every device-memory instruction (`ld`, `st`, `view`, `gather`, `scatter`, `atom`, `acas`) has the flag "
    "field `arg`: 0 when the compiler cannot tell which pointer argument its addresses derive from (a pointer "
    "loaded from memory, made from an integer, or selected between two arguments), else k + 1 for the k-th "
    "argument in signature order, which must be a pointer. At launch the runtime finds the allocation each "
    "pointer argument points into; an access with `arg` set is checked against that allocation alone, one "
    "with `arg` 0 against any live allocation of the device. A `view` with `arg` set leaves its register on "
    "the fallback tile unless the run lies inside the argument's allocation.")
VIEW_DOC = (
    "View registers (`v0` .. `v255`, per program) let the interpreter skip the copy through LX when a tile "
    "is one contiguous run of device memory. `ld` with a view register loads as usual, unless its box is one "
    "contiguous, unclipped run inside one allocation: then no byte moves and the view register holds the run's "
    "address. `view` (before the instruction producing a tile that only a `st` reads) points the view register "
    "at the run that `st` will write, under the same conditions; the producer writes through it and the `st` "
    "with that view register then has nothing left to do. Otherwise a view register holds the address of its "
    "fallback LX tile (the ld's destination, the view's `fallback`), so a program means the same whichever way "
    "each view resolves. Operands with a view bit (`@v<k>` in assembly) read or write at the address the "
    "register holds; a view register not yet set in this program holds its fallback tile's address. "
    "An `ld` with the `rows` flag (its only readers are `dot` operands and the sources of `red`s over a 2-D "
    "[len, inner] or [outer, len] tile, which take a row stride) may also leave "
    "its view register on strided rows: a 2-D box, unclipped, inside one allocation, whose rows are contiguous, "
    "non-overlapping and a whole number of elements apart. The view register then holds the first row's address "
    "and the row stride, which the `dot` or `red` reads its operand with; a fallback tile has dense rows. Other "
    "instructions take no such view register.")


@dataclass(frozen=True)
class Opcode:
    code: int
    name: str
    unit: str  # 'scalar' | 'vector' | 'sfu' | 'dma' | 'pe' | 'control'
    operands: tuple  # (field, kind, operand name) for the fields it uses, in assembly order
    flags: tuple = ()
    doc: str = ""
    uses_t2: bool = False

    @property
    def fields(self) -> list[str]:
        return [f for f, _, _ in self.operands]

    @property
    def roles(self) -> tuple:
        """Each operand's Role: what it is read or written as, and its size rule."""
        return _roles(self.name, self.operands, self.flags)

    @property
    def cost(self) -> str:
        """The cost class (a COSTS key) the performance model times it by."""
        return _cost(self.name, self.unit)

    @property
    def sim_only(self) -> bool:
        """True when it exists only to speed up the host simulator (SIM_ONLY)."""
        return self.name in SIM_ONLY

    @property
    def pure(self) -> bool:
        """Its writes are a function of its reads: no device memory, no control flow, no faults."""
        return self.unit in ("vector", "sfu")

    @property
    def flops(self) -> int:
        """Floating-point operations per element when t is a float (the model's FLOP counters)."""
        return _flops(self.name, self.cost)

    @property
    def exec_kind(self) -> str:
        """How the interpreter runs it (an EXEC_KINDS key)."""
        return _exec_kind(self.name, self.roles)

    @property
    def sources(self) -> tuple:
        """An elementwise opcode's tile sources (their Roles, in order); () for any other opcode."""
        return _sources(self.roles) if self.name in ELEMENTWISE_OPS else ()

    @property
    def desc_field(self) -> str | None:
        """The field naming its descriptor, if it takes one."""
        return next((f for f, kind, _ in self.operands if kind == "d"), None)

    @property
    def view_fields(self) -> str:
        """The operand fields that may name a view register (their view bit set)."""
        return "".join(f for f in "abcd" if VIEW[f] in self.flags)


def _ops(*spec):
    return tuple(tuple(s.split(":")) for s in spec)


_BIN_DOC = "dst[i] = a[i] {sym} b[i] for i < n, in dtype t."
_OPCODE_LIST: list[tuple] = []


def _op(name, unit, operands, flags=(), doc="", uses_t2=False):
    _OPCODE_LIST.append((name, unit, _ops(*operands), tuple(flags), doc, uses_t2))


# --- control -----------------------------------------------------------------------------------
_op("nop", "control", [], doc="Does nothing.")
_op("halt", "control", [], doc="Ends the program (tt.return from the kernel).")
_op("jmp", "control", ["a:l:target"], doc="Jumps to `target`. A backward jump also polls for interruption.")
_op("brz", "control", ["a:s:cond", "b:l:target"], doc="Jumps to `target` when the i1/integer scalar `cond` (dtype t) is zero.")
_op("brnz", "control", ["a:s:cond", "b:l:target"], doc="Jumps to `target` when the scalar `cond` (dtype t) is nonzero.")
_op("pid", "scalar", ["a:s:dst", "b:u:axis"], doc="dst (i32) = this program's id along grid axis `axis` (0, 1, 2).")
_op("nprog", "scalar", ["a:s:dst", "b:u:axis"], doc="dst (i32) = the grid's size along axis `axis`.")
_op("barrier", "control", [], doc="Synchronises the program's corelets; a no-op for one program.")

# --- data movement within LX ----------------------------------------------------------------
_op("const", "vector", ["a:v:dst", "b:k:value", "n:u:n"],
    doc="dst[i] = the constant pool entry `value` (raw bits of dtype t) for i < n.")
_op("iota", "vector", ["a:v:dst", "b:u:start", "n:u:n"],
    doc="dst[i] = start + i (dtype t, an integer type; start is a signed 32-bit value) for i < n.")
_op("copy", "vector", ["a:v:dst", "b:v:src", "n:u:n"], BCAST[1:2],
    doc="dst[i] = src[i] for i < n elements of dtype t (bc1: every dst[i] = src[0]). Also bitcasts and moves.")
_op("bmask", "vector", ["a:v:dst", "c:d:desc"],
    doc="Bounds mask: dst (i1, dense with the descriptor's shape) is 1 where idx[k] < limit[k] in every limited "
        "dimension of the descriptor, else 0 (strides are ignored). An index-bound mask (`offs < n`) as a tile, "
        "when an instruction needs its elements (tl.where, a gather's mask).")
_op("tcopy", "vector", ["a:v:dst", "b:v:src", "c:d:desc"],
    doc="Strided tile copy: dst is dense with the descriptor's shape; src element strides (in elements, 0 to "
        "broadcast) come from the descriptor. Broadcast, transpose, permute, slicing.")

# --- elementwise arithmetic --------------------------------------------------------------------
for _name, _sym in [("add", "+"), ("sub", "-"), ("mul", "*")]:
    _op(_name, "vector", ["a:v:dst", "b:v:a", "c:v:b", "n:u:n"], BCAST[1:3],
        doc=_BIN_DOC.format(sym=_sym) + " Integers wrap around; f16/bf16 round each result.")
for _name, _doc in [
    ("divf", "float division a / b (IEEE)."),
    ("remf", "float remainder with the sign of a (C fmod)."),
    ("divs", "signed integer division, truncating; division by zero gives 0 (Triton's is undefined)."),
    ("divu", "unsigned integer division; division by zero gives 0."),
    ("rems", "signed integer remainder with the sign of a; by zero gives 0."),
    ("remu", "unsigned integer remainder; by zero gives 0."),
    ("and", "bitwise and."), ("or", "bitwise or."), ("xor", "bitwise xor."),
    ("shl", "shift left; a shift >= the bit width gives 0."),
    ("shrs", "arithmetic shift right; a shift >= the bit width gives the sign fill."),
    ("shru", "logical shift right; a shift >= the bit width gives 0."),
    ("maxs", "signed max."), ("mins", "signed min."), ("maxu", "unsigned max."), ("minu", "unsigned min."),
    ("maxnumf", "float max; if one side is NaN the other is returned."),
    ("minnumf", "float min; if one side is NaN the other is returned."),
    ("maximumf", "float max propagating NaN; -0 < +0."),
    ("minimumf", "float min propagating NaN; -0 < +0."),
    ("mulhis", "high half of the signed double-width product."),
    ("mulhiu", "high half of the unsigned double-width product."),
]:
    _op(_name, "vector", ["a:v:dst", "b:v:a", "c:v:b", "n:u:n"], BCAST[1:3], doc=f"dst[i] = {_doc}")
_op("cmpi", "vector", ["a:v:dst", "b:v:a", "c:v:b", "n:u:n"], BCAST[1:3] + [Flag("pred", 8, 4, "icmp")],
    doc="dst[i] (i1) = a[i] pred b[i], integers of dtype t.")
_op("cmpf", "vector", ["a:v:dst", "b:v:a", "c:v:b", "n:u:n"], BCAST[1:3] + [Flag("pred", 8, 4, "fcmp")],
    doc="dst[i] (i1) = a[i] pred b[i], floats of dtype t.")
_op("select", "vector", ["a:v:dst", "b:v:cond", "c:v:a", "d:v:b", "n:u:n"], BCAST[1:4],
    doc="dst[i] = cond[i] ? a[i] : b[i] (cond is i1; a, b, dst of dtype t).")
_op("bsel", "vector", ["a:v:dst", "b:d:desc", "c:v:a", "d:v:b", "n:u:n"], BCAST[2:4],
    doc="Select by bounds: dst[idx] = a[idx] where idx[k] < limit[k] in every limited dimension of the descriptor "
        "(strides are ignored), else b[idx]; n elements of dtype t, dense over the descriptor's shape. "
        "`tl.where(offs < n, x, y)` without a mask tile; when no bound clips, a copy of a.")
_op("fma", "vector", ["a:v:dst", "b:v:a", "c:v:b", "d:v:c", "n:u:n"], BCAST[1:4],
    doc="dst[i] = a[i] * b[i] + c[i] with one rounding (floats).")
_op("binchain", "vector", ["a:v:dst", "b:v:x", "c:v:y", "d:v:z", "n:u:n"], BCAST[1:4] + [Flag("ops", 8, 4, "binchain")],
    doc="dst[i] = (x[i] op1 y[i]) op2 z[i] (f32, f64), op1 and op2 each add, sub or mul and each rounded: the "
        "bits of the two instructions in one pass, without the tile between them (compiler/fusion.py).")
_op("clamp", "vector", ["a:v:dst", "b:v:x", "c:v:lo", "d:v:hi", "n:u:n"], BCAST[1:4] + [Flag("propagate_nan", 8, 1)],
    doc="dst[i] = min(max(x[i], lo[i]), hi[i]) (floats); NaN x gives NaN when propagate_nan, else lo.")
_op("absi", "vector", ["a:v:dst", "b:v:a", "n:u:n"], BCAST[1:2], doc="dst[i] = |a[i]| for integers (wraps at the minimum).")
_op("ctpop", "vector", ["a:v:dst", "b:v:a", "n:u:n"], BCAST[1:2], doc="dst[i] = number of set bits of a[i].")
_op("ctlz", "vector", ["a:v:dst", "b:v:a", "n:u:n"], BCAST[1:2], doc="dst[i] = leading zero bits of a[i] (the width for 0).")
_op("cttz", "vector", ["a:v:dst", "b:v:a", "n:u:n"], BCAST[1:2], doc="dst[i] = trailing zero bits of a[i] (the width for 0).")
_op("cvt", "vector", ["a:v:dst", "b:v:src", "n:u:n"], BCAST[1:2] + [Flag("mode", 8, 4, "cvt")],
    doc="dst[i] (dtype t) = convert(src[i] (dtype t2)) by `mode`. fp8 and f16/bf16 narrowing honour the mode; "
        "rtne saturates to the largest finite for the fn/fnuz fp8 types.", uses_t2=True)
_op("math1", "sfu", ["a:v:dst", "b:v:a", "n:u:n"], BCAST[1:2] + [Flag("fn", 8, 8, "math1")],
    doc="dst[i] = fn(a[i]) for floats of dtype t, computed in f32 for f16/bf16/f32 and f64 for f64.")
_op("math2", "sfu", ["a:v:dst", "b:v:a", "c:v:b", "n:u:n"], BCAST[1:3] + [Flag("fn", 8, 8, "math2")],
    doc="dst[i] = fn(a[i], b[i]) for floats of dtype t.")

# --- reductions, scans, matmul -----------------------------------------------------------------
_op("red", "vector", ["a:v:dst", "b:v:src", "c:u:outer", "d:u:len", "e:u:inner"], [Flag("op", 8, 4, "red")],
    doc="Reduces src viewed as [outer, len, inner] along the middle axis: dst[o, i] = op over l of src[o, l, i]. "
        "Float sums and products combine in dtype t's compute type in a fixed order: a contiguous row (inner == 1) "
        f"of {2 * RED_LANES} or more in {RED_LANES} interleaved partial results (lane j takes elements j, "
        f"j+{RED_LANES}, ...), combined as a tree (lane j with lane j+{RED_LANES // 2}, then j+{RED_LANES // 4}, "
        "and so on to j+1), then the tail in index order; otherwise in index order. "
        "Deterministic, and vectorisable. A NaN sum, product, maximum or minimum is the default NaN.")
_op("dot", "pe", ["a:v:dst", "b:v:a", "c:v:b", "d:v?:acc", "e:u:mn", "n:u:k"],
    [Flag("batch", 0, 16), Flag("bt", 16, 1), VIEW["b"], VIEW["c"]],
    doc="Matmul-accumulate on the PE array: for each of `batch` (0 means 1) matrices, dst[M,N] = a[M,K] @ b[K,N] "
        "+ acc[M,N] (acc NONE: zero). mn = M << 16 | N. a, b have dtype t2; dst, acc have dtype t (f32 for float "
        "inputs, i32 for i8). Products accumulate in t. bt: b holds b's transpose, [N,K] row-major (a weight "
        "used as `x @ w.T`, loaded with its contiguous K dimension innermost). a and b may be view registers "
        "(unbatched dots only), read with the row stride the register holds.", uses_t2=True)

# --- DMA between device memory and LX --------------------------------------------------------
_op("ld", "dma", ["a:v:dst", "b:s:base", "c:d:desc", "d:v?:mask", "e:v?:other", "n:w?:view"],
    [Flag("bc_mask", 0, 1), Flag("bc_other", 1, 1), Flag("rows", 2, 1), BASE_ARG],
    doc="Strided load: dst[idx] = *(base + sum(idx[k] * stride[k])) over the descriptor's shape, for elements of dtype "
        "t. An element is inactive where the i1 `mask` is 0, or outside the descriptor's bounds (idx[k] >= limit[k] "
        "in a limited dimension); its address is not touched and dst gets `other` (or 0 when other is NONE). A "
        "descriptor with limits takes no mask. Every touched address is checked (see the base arguments section). "
        "rows: the view register may hold strided rows (see the view registers section).")
_op("st", "dma", ["a:s:base", "b:d:desc", "c:v:src", "d:v?:mask", "e:w?:view"],
    [Flag("bc_src", 0, 1), Flag("bc_mask", 1, 1), BASE_ARG, VIEW["c"]],
    doc="Strided store: *(base + sum(idx[k] * stride[k])) = src[idx] for active elements (mask set, inside the "
        "descriptor's bounds). Checked like ld. With `view`: nothing to do when the view register points at "
        "device memory (the producer of src wrote there already, see `view`).")
_op("view", "dma", ["a:w:view", "b:s:base", "c:d:desc", "d:v:fallback"], [BASE_ARG],
    doc="Points view register `view` at the device memory a `st` of dtype t through base and desc would write, "
        "when that is one contiguous run inside one allocation (the base argument's, when known) with no bound "
        "clipping it (checked for writing); "
        "otherwise at `fallback`, the LX tile the st stores from. See the view registers section.")
_op("gather", "dma", ["a:v:dst", "b:v:addr", "c:v?:mask", "d:v?:other", "n:u:n"],
    [Flag("bc_addr", 0, 1), Flag("bc_mask", 1, 1), Flag("bc_other", 2, 1), BASE_ARG],
    doc="dst[i] = *(t*)addr[i] for i < n (addr holds i64 device addresses), masked like ld.")
_op("scatter", "dma", ["a:v:addr", "b:v:src", "c:v?:mask", "n:u:n"],
    [Flag("bc_addr", 0, 1), Flag("bc_src", 1, 1), Flag("bc_mask", 2, 1), BASE_ARG],
    doc="*(t*)addr[i] = src[i] for i < n where mask is set, in index order.")
_op("atom", "dma", ["a:v?:dst", "b:v:addr", "c:v:val", "d:v?:mask", "n:u:n"],
    [Flag("bc_addr", 0, 1), Flag("bc_val", 1, 1), Flag("bc_mask", 2, 1), Flag("op", 8, 4, "atom"), BASE_ARG],
    doc="Atomic read-modify-write, element by element in index order: dst[i] = old *addr[i]; *addr[i] = op(old, "
        "val[i]) where mask is set. Atomic with respect to every core (host atomics).")
_op("acas", "dma", ["a:v:dst", "b:v:addr", "c:v:cmp", "d:v:val", "n:u:n"],
    [Flag("bc_addr", 0, 1), Flag("bc_cmp", 1, 1), Flag("bc_val", 2, 1), BASE_ARG],
    doc="Atomic compare-and-swap: dst[i] = old *addr[i]; if old == cmp[i] then *addr[i] = val[i].")

# --- debugging ---------------------------------------------------------------------------------
_op("print", "control", ["a:str:prefix", "b:v:src", "n:u:n"],
    [Flag("hex", 0, 1), Flag("signed", 1, 1), Flag("scalar", 2, 1)],
    doc="Prints `pid (x, y, z) idx (i0, i1, ...)prefix value` for each of the n elements of src (dtype t), in "
        "order. The string may start with a header `\\x1fd0,d1,...[xR]\\x1f`: the shape the index is "
        "taken in (default: flat) and R lines per element (runtime/print.h).")
_op("assert", "control", ["a:v:cond", "b:str:message", "n:u:n"], [Flag("bc_cond", 0, 1)],
    doc="Fails the launch with `message` and the source line when any of the n i1 elements of cond is 0.")

# elementwise opcodes and red read (and the elementwise ones write) through view registers
VIEW_OPS = {"add", "sub", "mul", "divf", "remf", "divs", "divu", "rems", "remu", "and", "or", "xor", "shl", "shrs",
            "shru", "maxs", "mins", "maxu", "minu", "maxnumf", "minnumf", "maximumf", "minimumf", "mulhis", "mulhiu",
            "cmpi", "cmpf", "select", "fma", "binchain", "clamp", "absi", "ctpop", "ctlz", "cttz", "cvt", "math1", "math2", "red"}

# the elementwise opcodes: n elements of one result from up to three tile sources, each of which a
# broadcast bit may make one element; the interpreter runs them through one typed loop each
ELEMENTWISE_OPS = VIEW_OPS - {"red"}

# How the interpreter runs an opcode (runtime/interp.c's dispatch loop switches on it; isa_gen.h has it as
# K_<KIND> and each opcode's in spyre_opcodes[].exec). An elementwise opcode's kind is its number of tile
# sources; every other opcode's is its own name, but for those listed in _EXEC_OF.
EXEC_KINDS = {
    "nop": "nothing", "halt": "ends the program", "jmp": "jump", "brz": "branch if zero",
    "brnz": "branch if nonzero", "pid": "program id", "nprog": "grid size", "const": "fill from the pool",
    "iota": "start + i", "copy": "move or splat", "tcopy": "strided tile copy", "bmask": "bounds mask",
    "bsel": "select by bounds", "un": "elementwise, one source", "bin": "elementwise, two sources",
    "tern": "elementwise, three sources",
    "cvt2": "a cvt through a 64-bit intermediate (the decoder's choice when no direct loop converts the pair)",
    "red": "reduction", "dot": "PE array", "ld": "DMA load", "st": "DMA store", "view": "view register",
    "gather": "gather", "scatter": "scatter", "atom": "atomic", "acas": "atomic compare-and-swap",
    "print": "print", "assert": "assert"}
_EXEC_OF = {"barrier": "nop"}
_ELEMENTWISE_EXEC = ("un", "bin", "tern")


def _exec_kind(name, roles) -> str:
    if name in ELEMENTWISE_OPS:
        return _ELEMENTWISE_EXEC[len(_sources(roles)) - 1]
    kind = _EXEC_OF.get(name, name)
    if kind not in EXEC_KINDS:
        raise ValueError(f"opcode {name!r} has no interpreter kind: add it to EXEC_KINDS or _EXEC_OF")
    return kind


def _sources(roles) -> tuple:
    """The tile operands an elementwise instruction reads, in order (source 0, 1, 2)."""
    return tuple(r for r in roles if r.access == "r" and r.kind == "v")


# elementwise opcodes whose tile operands all have the instruction's element type (cvt, the compares and
# select mix sizes): a result may overwrite a source of the same size in place
SAME_SIZE_ELEMENTWISE = VIEW_OPS - {"red", "cvt", "cmpi", "cmpf", "select"}


def _with_views(spec):
    name, unit, operands, flags, doc, uses_t2 = spec
    if name in VIEW_OPS:
        fields = [f for f, kind, _ in operands if kind == "v" and (name != "red" or f != "a")]
        flags = flags + tuple(VIEW[f] for f in fields)
    return name, unit, operands, flags, doc, uses_t2


# ---------------------------------------------------------------------------------------------
# What each operand is: read or written, and how many bytes. The runtime checks every operand's
# extent against the arena from these rules when it loads a binary, and the performance model
# tracks the same reads and writes; both loop over the generated table (runtime/isa_gen.h).
# ---------------------------------------------------------------------------------------------
SIZES = {
    "sreg": "one scalar register slot (SREG_BYTES)",
    "n.t": "n elements of dtype t",
    "n.t2": "n elements of dtype t2",
    "n.i1": "n i1 elements, a byte each",
    "n.addr": "n i64 device addresses",
    "desc.t": "the descriptor's element count, of dtype t",
    "desc.i1": "the descriptor's element count, a byte each",
    "red.out": "outer x inner elements of t",
    "red.in": "outer x len x inner elements of t",
    "dot.a": "batch x M x K elements of t2",
    "dot.b": "batch x K x N elements of t2",
    "dot.c": "batch x M x N elements of t",
    "span": "the bytes the descriptor's element strides reach from the operand (tcopy)",
    "desc.regs": "the descriptor's stride, bound and offset-vector registers",
    "desc.bounds": "the descriptor's bound registers",
    "desc.const": "no register (constant strides, no bounds, no offset vectors)",
}
# a broadcast operand (its bc flag set) is one element: what one element of each size rule is
ONE_ELEMENT = {"n.t": "t", "n.t2": "t2", "n.i1": "i1", "n.addr": "addr", "desc.t": "t", "desc.i1": "i1"}
ACCESS = {"r": "read", "w": "written", "-": "named only (a fallback tile, checked but not accessed)"}

_SIZE_OF = {
    ("cmpi", "dst"): "n.i1", ("cmpf", "dst"): "n.i1", ("select", "cond"): "n.i1", ("cvt", "src"): "n.t2",
    ("red", "dst"): "red.out", ("red", "src"): "red.in",
    ("dot", "dst"): "dot.c", ("dot", "a"): "dot.a", ("dot", "b"): "dot.b", ("dot", "acc"): "dot.c",
    ("ld", "dst"): "desc.t", ("ld", "mask"): "desc.i1", ("ld", "other"): "desc.t",
    ("st", "src"): "desc.t", ("st", "mask"): "desc.i1", ("view", "fallback"): "desc.t",
    ("bmask", "dst"): "desc.t", ("bmask", "desc"): "desc.bounds", ("bsel", "desc"): "desc.bounds",
    ("tcopy", "dst"): "desc.t", ("tcopy", "src"): "span", ("tcopy", "desc"): "desc.const",
    ("gather", "addr"): "n.addr", ("gather", "mask"): "n.i1", ("scatter", "addr"): "n.addr",
    ("scatter", "mask"): "n.i1", ("atom", "addr"): "n.addr", ("atom", "mask"): "n.i1",
    ("acas", "addr"): "n.addr", ("assert", "cond"): "n.i1",
}
_KIND_SIZE = {"s": "sreg", "v": "n.t", "v?": "n.t", "d": "desc.regs", "w": "desc.t", "w?": "desc.t"}
# view register operands: ld and view set theirs (the instruction that gives it its bytes), st reads
_ACCESS_OF = {("ld", "view"): "w", ("view", "view"): "w", ("view", "fallback"): "-"}


@dataclass(frozen=True)
class Role:
    field: str
    name: str
    kind: str  # an OPERAND_KINDS key
    access: str | None  # an ACCESS key; None for immediates (u, k, l, str)
    size: str | None  # a SIZES key
    bcast: str | None  # the flag that makes this operand one element, if any


def _roles(name, operands, flags) -> tuple:
    flag_names = {fl.name for fl in flags}
    roles = []
    for pos, (fld, kind, opname) in enumerate(operands):
        size = _SIZE_OF.get((name, opname), _KIND_SIZE.get(kind))
        access = None if size is None else _ACCESS_OF.get((name, opname), "w" if opname == "dst" else "r")
        # bcN names the operand at position N (the elementwise form), bc_<name> the operand by name
        bc = next((f for f in (f"bc_{opname}", f"bc{pos}") if f in flag_names), None)
        roles.append(Role(fld, opname, kind, access, size, bc if size in ONE_ELEMENT else None))
    return tuple(roles)


# Cost classes: how the performance model (runtime/perf.c, docs/perf-model.md) times an opcode.
COSTS = {
    "none": "nothing: sequencer bookkeeping",
    "branch": "branch_cycles on the sequencer",
    "scalar": "one sequencer slot",
    "vector": "n / vector lanes cycles (a one-element result in a scalar register: the scalar unit)",
    "divide": "like vector, divide_cost per pass",
    "tile": "n / vector lanes cycles on the vector unit, whatever the destination",
    "permute": "the descriptor's elements / vector lanes; twice that when the innermost stride is not 1",
    "sfu": "n / SFU lanes cycles, at the cycles per lane of the function's SFU_COST class per pass",
    "reduce": "a pass over the input, then a tree: log2(len) more vector latencies",
    "pe": "passes of the PE array, at the input dtype's pe_rate",
    "dma": "the sticks the descriptor's box touches, at the DMA bandwidth",
    "gather": "the sticks the address list touches, plus address generation per element",
    "atomic": "a read-modify-write per element at the memory controller",
}
_DIVISIONS = ("divf", "remf", "divs", "divu", "rems", "remu")
_COST_OF = {"jmp": "branch", "brz": "branch", "brnz": "branch", "pid": "scalar", "nprog": "scalar",
            "print": "scalar", "assert": "scalar", "bmask": "tile", "bsel": "tile", "tcopy": "permute",
            "math1": "sfu", "math2": "sfu", "red": "reduce", "dot": "pe", "ld": "dma", "st": "dma",
            "gather": "gather", "scatter": "gather", "atom": "atomic", "acas": "atomic",
            **{d: "divide" for d in _DIVISIONS}}
# opcodes that exist only to speed up the host simulator: the hardware moves tiles through LX, so
# the performance model charges them nothing (and a view register operand as its fallback tile)
SIM_ONLY = {"view": "points a view register at device memory, eliding a copy through LX",
            "binchain": "two elementwise instructions in one pass over the tiles"}
# floating-point operations per element (when t is a float), for the model's FLOP counters
_FLOPS = {"fma": 2, "binchain": 2, "cmpf": 0, "select": 0, "copy": 0, "const": 0, "iota": 0,
          "absi": 0, "ctpop": 0, "ctlz": 0, "cttz": 0, "cvt": 0}
# What each SFU function costs: a class, whose cycles per lane and pass the performance model takes from
# HardwareConfig (SFU_COST_FIGURES). Functions not listed are "transcendental".
#   cheap           as an add (rounding, sign and class tests, exact min/max);
#   reciprocal      one reciprocal or root pass (sqrt, rsqrt, 1/x; hypot, fmod, remainder around one);
#   transcendental  one exp/log/trig pass;
#   compound        two passes (pow: exp2(b * log2 a); atan2: a division and an atan; cbrt: a pow);
#   special         a series or iteration of several passes (gamma, Bessel, inverse erf and normal CDF).
SFU_COST_CLASSES = ("cheap", "reciprocal", "transcendental", "compound", "special")
SFU_COST_FIGURES = {"reciprocal": "sfu_reciprocal_cost", "transcendental": "transcendental_cost",
                    "compound": "sfu_compound_cost", "special": "sfu_special_cost"}
SFU_COST = {
    "math1": {**dict.fromkeys(("floor", "ceil", "trunc", "round", "rint", "abs", "neg", "signbit", "isnan", "isinf",
                               "isfinite", "nearbyint"), "cheap"),
              **dict.fromkeys(("sqrt", "rsqrt", "rcp"), "reciprocal"),
              "cbrt": "compound",
              **dict.fromkeys(("erfinv", "lgamma", "tgamma", "j0", "j1", "y0", "y1", "normcdfinv"), "special")},
    "math2": {**dict.fromkeys(("copysign", "fdim", "ldexp", "fmaxnum", "fminnum", "nextafter"), "cheap"),
              **dict.fromkeys(("hypot", "fmod", "remainder"), "reciprocal"),
              **dict.fromkeys(("pow", "atan2"), "compound")},
}


def sfu_cost_class(enum: str, fn: str) -> str:
    return SFU_COST[enum].get(fn, "transcendental")


def _cost(name, unit):
    if name in _COST_OF:
        return _COST_OF[name]
    return "vector" if unit == "vector" else "none"


def _flops(name, cost):
    if cost in ("vector", "divide", "sfu", "reduce"):
        return _FLOPS.get(name, 1)
    return 0


OPCODES = [Opcode(i, *_with_views(spec)) for i, spec in enumerate(_OPCODE_LIST)]
OPCODE_BY_NAME = {op.name: op for op in OPCODES}
UNITS = {
    "control": "sequencer: branches, program end, debugging",
    "scalar": "scalar unit: grid registers",
    "vector": "vector unit: elementwise, compare/select, casts, reductions, tile moves",
    "sfu": "special-function unit: transcendental and rounding functions",
    "dma": "DMA engine: device memory <-> LX, gather/scatter, atomics",
    "pe": "PE array: matmul-accumulate",
}


# ---------------------------------------------------------------------------------------------
# Instructions and their 32-byte encoding.
# ---------------------------------------------------------------------------------------------
FIELDS = ("a", "b", "c", "d", "e", "n")


@dataclass
class Insn:
    op: str
    t: str = "i32"
    t2: str = "i1"
    # field name -> int; in the compiler's machine IR, before allocation, also the Scalar, Tile and
    # Label objects that become offsets and indices (compiler/mir.py)
    args: dict = field(default_factory=dict)
    flags: dict = field(default_factory=dict)  # flag name -> int (enum flags may be given by name)
    loc: int = -1  # index into the program's location table, for error messages and asm comments

    def flag_word(self) -> int:
        opcode = OPCODE_BY_NAME[self.op]
        word = 0
        for fl in opcode.flags:
            val = self.flags.get(fl.name, 0)
            if isinstance(val, str):
                val = enum_value(fl.enum, val)
            if val < 0 or val >= (1 << fl.bits):
                raise ValueError(f"{self.op}: flag {fl.name}={val} does not fit in {fl.bits} bits")
            word |= val << fl.shift
        unknown = set(self.flags) - {fl.name for fl in opcode.flags}
        if unknown:
            raise ValueError(f"{self.op}: unknown flags {sorted(unknown)}")
        return word


def encode_insn(insn: Insn) -> bytes:
    opcode = OPCODE_BY_NAME[insn.op]
    unknown = set(insn.args) - set(opcode.fields)
    if unknown:
        raise ValueError(f"{insn.op}: unknown operand fields {sorted(unknown)}")
    vals = [insn.args.get(f, NONE if _field_kind(opcode, f) in OPTIONAL_KINDS else 0) for f in FIELDS]
    return INSN_STRUCT.pack(opcode.code, DTYPE_BY_NAME[insn.t].code, DTYPE_BY_NAME[insn.t2].code,
                            insn.flag_word(), *vals)


def decode_insn(raw: bytes, offset: int = 0) -> Insn:
    code, t, t2, word, *vals = INSN_STRUCT.unpack_from(raw, offset)
    if code >= len(OPCODES):
        raise ValueError(f"unknown opcode {code} at byte {offset}")
    opcode = OPCODES[code]
    args = {f: v for f, v in zip(FIELDS, vals) if f in opcode.fields}
    flags = {}
    for fl in opcode.flags:
        v = (word & fl.mask) >> fl.shift
        if v:
            flags[fl.name] = enum_name(fl.enum, v) if fl.enum else v
        elif fl.enum:
            flags[fl.name] = enum_name(fl.enum, 0)
    return Insn(opcode.name, DTYPE_BY_CODE[t].name, DTYPE_BY_CODE[t2].name, args, flags)


def _field_kind(opcode: Opcode, fld: str) -> str | None:
    for f, kind, _ in opcode.operands:
        if f == fld:
            return kind
    return None


# ---------------------------------------------------------------------------------------------
# Descriptors: shapes and strides for ld/st (byte strides, constant or from a scalar register)
# and tcopy (element strides, constant). Fixed-size records so the interpreter reads them as is.
# ---------------------------------------------------------------------------------------------
DESC_STRUCT = struct.Struct(f"<ii{MAX_RANK}q{MAX_RANK}q{MAX_RANK}I{MAX_RANK}I{MAX_RANK}I")


@dataclass
class Descriptor:
    shape: tuple  # elements per dimension, outermost first
    # per dimension: int (constant), ('s', slot_offset) read from a scalar register, or ('v', arena_offset) of
    # an i64 offset vector in LX: dimension k then adds vec[idx[k]] bytes instead of idx[k] * stride (ld/st)
    strides: tuple
    # ld/st bounds, per dimension: None, or ('s', slot_offset) of an i64 register: idx < limit is in bounds
    limits: tuple = ()

    def encode(self) -> bytes:
        rank = len(self.shape)
        if rank > MAX_RANK:
            raise ValueError(f"descriptor rank {rank} exceeds {MAX_RANK}")
        shape = list(self.shape) + [1] * (MAX_RANK - rank)
        consts, slots, vecs = [], [], []
        for s in self.strides:
            kind = s[0] if isinstance(s, tuple) else None
            consts.append(0 if kind else int(s))
            slots.append(s[1] if kind == "s" else NONE)
            vecs.append(s[1] if kind == "v" else NONE)
        pad = [NONE] * (MAX_RANK - rank)
        limits = [NONE if lim is None else lim[1] for lim in self.limits]
        limits += [NONE] * (MAX_RANK - len(limits))
        return DESC_STRUCT.pack(rank, 0, *shape, *consts, *([0] * (MAX_RANK - rank)), *slots, *pad, *limits,
                                *vecs, *pad)

    @staticmethod
    def decode(raw: bytes, offset: int = 0) -> "Descriptor":
        vals = DESC_STRUCT.unpack_from(raw, offset)
        rank = vals[0]
        field = lambda k: vals[2 + k * MAX_RANK:2 + (k + 1) * MAX_RANK][:rank]
        shape, consts, slots, lims, vecs = (field(k) for k in range(5))
        strides = tuple(("v", v) if v != NONE else c if s == NONE else ("s", s) for c, s, v in zip(consts, slots, vecs))
        limits = tuple(None if x == NONE else ("s", x) for x in lims)
        if all(x is None for x in limits):
            limits = ()
        return Descriptor(tuple(shape), strides, limits)
