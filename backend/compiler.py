"""The spyre backend's compiler: TTIR -> Spyre assembly -> Spyre binary.

Three stages over a frozen options dataclass, as Triton's own backends do:
  ttir      Triton's target-independent passes (block pointers and tensor descriptors become pointers);
  spyreasm  parse the TTIR and lower it to a Spyre program, printed as readable assembly with the
            kernel's Python source lines as comments;
  spyrebin  assemble that text into the binary the runtime loads.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import glob
import hashlib
import os
from dataclasses import dataclass
from typing import Any, Dict

from triton._C.libtriton import ir, passes
from triton.backends.compiler import BaseBackend, GPUTarget, Language

from spyre_triton import config, isa


@dataclass(frozen=True)
class SpyreOptions:
    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 2
    warp_size: int = 32
    enable_fp_fusion: bool = True
    # every fp8 variant of Triton: OCP e4m3/e5m2, AMD's fnuz variants e4b8/e5b16 (bias 8/16, 0x80 the only NaN)
    # and fp8e4b15 (bias 15, no special values; its casts are convert_fp8e4b15 below)
    supported_fp8_dtypes: tuple = ("fp8e4b15", "fp8e4b8", "fp8e4nv", "fp8e5", "fp8e5b16")
    deprecated_fp8_dot_operand_dtypes: tuple = ()
    default_dot_input_precision: str = "ieee"
    # every precision is computed as ieee (fp32 products and sums), at least as accurate as asked
    allowed_dot_input_precisions: tuple = ("ieee", "tf32", "tf32x3", "bf16x3", "bf16x6")
    max_num_imprecise_acc_default: int = 0
    extern_libs: Any = None
    debug: bool = False
    sanitize_overflow: bool = False
    backend_name: str = "spyre"
    arch: str = config.ARCH
    instrumentation_mode: str = ""
    fpsan_homomorphic_casts: bool = False  # Triton >= 3.9's JIT passes it to every backend; no sanitizer here
    lx_bytes: int = config.LX_TILE_BYTES
    elide_copies: bool = config.ELIDE_COPIES  # view registers (spyre_triton/compiler/views.py)
    # GPU tuning knobs that tutorials and Inductor pass in configs; accepted and ignored on Spyre.
    matrix_instr_nonkdim: int = 0
    waves_per_eu: int = 0
    kpack: int = 1
    maxnreg: Any = None
    launch_cooperative_grid: bool = False  # every program of a grid runs to completion: always cooperative

    def __post_init__(self):
        if self.extern_libs is not None and not isinstance(self.extern_libs, tuple):
            object.__setattr__(self, "extern_libs", tuple(dict(self.extern_libs).items()))

    def hash(self) -> str:
        key = "_".join(f"{k}-{v}" for k, v in sorted(self.__dict__.items()))
        return hashlib.sha256(key.encode()).hexdigest()


def min_dot_size(target):
    return lambda lhs_type, rhs_type: (1, 1, 1)


def convert_fp8e4b15(arg, dst_ty, fp_downcast_rounding=None, _semantic=None):
    """Casts from and to fp8e4b15, which Triton's front end leaves to the backend ("convert_custom_types").

    fp8e4b15 (an i8 in the TTIR: MLIR has no such type) is fp8e4nv's layout with exponent bias 15 and
    no special values, so it is the upper byte of an f16 shifted left by one, as in Triton's CUDA
    conversions (third_party/nvidia/language/cuda/utils.py), which this reproduces bit for bit with
    integer ops:
      up:   f16 bits = sign << 15 | (x & 0x7F) << 7   (exact; 0x7F is 1.875, not NaN)
      down: through f16 (from f32/f64 toward zero), |h| clamped to 1.75 (0x3F00; inf and NaN give
            1.75 too), then rounded half away from zero: ((|h| + 0x40) >> 7) | sign; -0 stays -0.
    The rounding mode argument is ignored, as on CUDA."""
    from triton.language import core as tl
    s = _semantic

    def const(v):
        return s.to_tensor(tl.constexpr(v))

    dst = dst_ty.scalar
    if arg.type.scalar.is_fp8e4b15():
        w = s.cast(s.bitcast(arg, tl.uint8), tl.int32)
        h = s.or_(s.shl(s.and_(w, const(0x80)), const(8)), s.shl(s.and_(w, const(0x7F)), const(7)))
        f16 = s.bitcast(s.cast(h, tl.int16), tl.float16)
        return f16 if dst.is_fp16() else s.cast(f16, dst)
    assert dst.is_fp8e4b15()
    src = arg.type.scalar
    if not src.is_floating() or src.is_bf16():
        arg = s.cast(arg, tl.float32)  # exact for bf16
    if not arg.type.scalar.is_fp16():
        wide = arg.type.scalar.primitive_bitwidth > 16
        arg = s.cast(arg, tl.float16, fp_downcast_rounding="rtz" if wide else None)
    bits = s.cast(s.bitcast(arg, tl.int16), tl.int32)  # sign-extended; only the low 16 bits are used
    sign = s.lshr(s.and_(bits, const(0x8000)), const(8))
    mag = s.minimum(s.and_(bits, const(0x7FFF)), const(0x3F00), tl.PropagateNan.NONE)
    code = s.or_(s.lshr(s.add(mag, const(0x40), False), const(7)), sign)
    return s.bitcast(s.cast(code, tl.uint8), tl.float8e4b15)


# metadata key under which make_spyreasm hands its Program to make_spyrebin, which pops it before Triton
# writes the metadata out
_PROGRAM_KEY = "spyre_program"


def validate_options(options: SpyreOptions) -> SpyreOptions:
    """The one check of what the stages will rely on: the options Triton parsed from the user's
    (and SPYRE_* environment) settings describe a kernel the runtime can load."""
    lx = options.lx_bytes
    if not isinstance(lx, int) or not 0 < lx <= config.LX_BYTES:
        raise ValueError(f"Spyre option lx_bytes={lx!r} (or SPYRE_LX_TILE_BYTES): the LX budget for tiles must "
                         f"be a positive number of bytes, at most the {config.LX_BYTES} bytes of a core's LX")
    return options


@contextlib.contextmanager
def _no_gc():
    """The stages allocate many short-lived objects and free them without cycles; in a process that holds a
    model and Inductor's state, the collections they trigger walked its whole heap (7% of the stages' time
    when compiling the benchmark models). A collection still runs after the stage, if one is due."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _print_scalars_per_thread(program, threads: int) -> None:
    """A GPU prints a scalar operand (and a print without operands) once per thread, num_warps *
    warp_size identical lines, and Triton's tests count them: the print's header (runtime/print.h)
    gets that repeat count."""
    for insn in program.insns:
        if insn.op == "print" and insn.flags.get("scalar"):
            s = program.strings[insn.args["a"]]
            end = s.find("\x1f", 1) if s.startswith("\x1f") else -1
            if end > 0:
                program.strings[insn.args["a"]] = f"{s[:end]}x{threads}{s[end:]}"


class SpyreBackend(BaseBackend):
    supports_native_tensor_specialization = True  # data_ptr() % 16 in C, as the base class does in Python

    @staticmethod
    def supports_target(target: GPUTarget):
        return target.backend == "spyre"

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)
        self.binary_ext = "spyrebin"

    def parse_options(self, opts) -> SpyreOptions:
        known = SpyreOptions.__dataclass_fields__
        args = {k: v for k, v in opts.items() if k in known and v is not None}
        if "enable_fp_fusion" not in args:  # as Triton's GPU backends: TRITON_DEFAULT_FP_FUSION, knobs
            from triton import knobs
            args["enable_fp_fusion"] = knobs.language.default_fp_fusion
        if "supported_fp8_dtypes" in args:
            args["supported_fp8_dtypes"] = tuple(sorted(args["supported_fp8_dtypes"]))
        if "allowed_dot_input_precisions" in args:
            args["allowed_dot_input_precisions"] = tuple(args["allowed_dot_input_precisions"])
        return validate_options(SpyreOptions(**args))

    def pack_metadata(self, metadata):
        return (metadata.num_warps, metadata.num_ctas, metadata.shared)

    def get_codegen_implementation(self, options):
        return {"min_dot_size": min_dot_size(self.target), "convert_custom_types": convert_fp8e4b15}

    def get_module_map(self) -> Dict[str, Any]:
        from spyre_triton import libdevice
        return {"triton.language.extra.libdevice": libdevice}

    def load_dialects(self, ctx):
        pass

    @staticmethod
    def make_ttir(mod, metadata, options):
        pm = ir.pass_manager(mod.context)
        pm.enable_debug()
        passes.common.add_inliner(pm)
        if hasattr(passes.ttir, "add_rewrite_tensor_pointer"):  # block pointers: gone from Triton 3.9
            passes.ttir.add_rewrite_tensor_pointer(pm)
        passes.ttir.add_rewrite_tensor_descriptor_to_pointer(pm)
        passes.common.add_canonicalizer(pm)
        passes.ttir.add_combine(pm)
        passes.ttir.add_reorder_broadcast(pm)
        passes.common.add_cse(pm)
        passes.common.add_symbol_dce(pm)
        passes.ttir.add_loop_unroll(pm)
        pm.run(mod, "make_ttir")
        return mod

    @staticmethod
    def make_spyreasm(mod, metadata, options):
        # Imported here: this module is imported while `triton` itself is still initialising.
        from spyre_triton.compiler import lower, ttir
        with _no_gc():
            module = ttir.parse_module(str(mod))
            program = lower.lower_module(module, options.lx_bytes, options.elide_copies, options.enable_fp_fusion)
            _print_scalars_per_thread(program, options.num_warps * options.warp_size)
            metadata["name"] = program.name
            metadata["shared"] = max(program.lx_bytes, 1)
            asm = program.to_asm()
        metadata[_PROGRAM_KEY] = (asm, program)
        return asm

    @staticmethod
    def make_spyrebin(src, metadata, options):
        from spyre_triton.asm import parse_asm
        # the text make_spyreasm printed is its program: encode that without reading the text back (an
        # override may have replaced the text: then it is parsed as any assembly is)
        asm, program = metadata.pop(_PROGRAM_KEY, (None, None))
        with _no_gc():
            return (program if asm is src else parse_asm(src)).encode()

    def add_stages(self, stages, options, language=Language.TRITON):
        if language != Language.TRITON:
            raise NotImplementedError("the Spyre backend compiles Triton kernels, not Gluon")
        stages["ttir"] = lambda src, metadata: self.make_ttir(src, metadata, options)
        stages["spyreasm"] = lambda src, metadata: self.make_spyreasm(src, metadata, options)
        stages["spyrebin"] = lambda src, metadata: self.make_spyrebin(src, metadata, options)

    @functools.lru_cache()
    def hash(self):
        return f"spyre-isa{isa.ISA_VERSION}-{_compiler_source_hash()}-{self.target.arch}"


@functools.lru_cache()
def _compiler_source_hash() -> str:
    """A digest of the compiler's own sources: Triton's cache key includes the backend hash, so any
    change to the lowering, the ISA or this file recompiles cached kernels instead of reusing them."""
    import spyre_triton
    root = os.path.dirname(spyre_triton.__file__)
    files = sorted(glob.glob(os.path.join(root, "compiler", "*.py")))
    files += [os.path.join(root, f) for f in ("isa.py", "asm.py", "libdevice.py", "config.py")]
    files.append(os.path.abspath(__file__))
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:16]
