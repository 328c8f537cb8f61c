"""Which implementations a matmul may get on spyre: block sizes for Inductor's mm/bmm Triton
templates (in every mode), and the choices class that gives spyre matmuls those templates
instead of extern aten calls on the host CPU."""
from __future__ import annotations

import warnings

from .device import DEVICE


def _register_template_heuristics(mod) -> None:
    """Triton matmul templates (mm/bmm/addmm/baddbmm) take their block-size candidates from a
    heuristic registered per device; without one Inductor logs an error and offers no Triton
    choice. Spyre's heuristic differs from the GPU ones in two ways:

    - it runs in every mode, not only under max-autotune (`should_run`): on spyre the Triton
      template is how a matmul reaches the accelerator at all (see `SpyreChoices`);
    - outside max-autotune it gives exactly one block size, picked from the problem's shape, so
      nothing is benchmarked at compile time; under max-autotune it gives a few candidates.

    Candidates are stick-aligned (32 fp32 = 128 bytes), one stage (DMA into LX is explicit; there
    is no software pipelining to tune) and few, since each one is compiled and timed on the
    simulator."""
    from torch._inductor import config as inductor_config
    from torch._inductor.kernel.bmm import bmm_template
    from torch._inductor.kernel.mm import mm_template
    from torch._inductor.runtime.runtime_utils import next_power_of_2
    from torch._inductor.template_heuristics.registry import register_template_heuristic
    from torch._inductor.template_heuristics.triton import (BaseConfigHeuristic, GemmConfig,
                                                            MMTemplateConfigMixin)
    from torch._inductor.template_heuristics.triton_addmm import AddMMConfigMixin
    from torch._inductor.virtualized import V

    from spyre_triton import decode_configs

    class SpyreConfigHeuristic(BaseConfigHeuristic):
        def __init__(self) -> None:
            super().__init__()
            self.mm_configs = [
                GemmConfig(32, 32, 32, 1, 4),
                GemmConfig(64, 64, 32, 1, 4),
                GemmConfig(64, 128, 64, 1, 4),
                GemmConfig(128, 128, 64, 1, 4),
            ]
            # max_autotune_gemm_search_space="EXHAUSTIVE"
            self.exhaustive_configs = [GemmConfig(m, n, k, 1, 4) for m in (32, 64, 128, 256)
                                       for n in (32, 64, 128, 256) for k in (32, 64, 128)]

        def preprocess_mm_configs(self, m, n, k, configs, *args, **kwargs):
            if inductor_config.max_autotune or inductor_config.max_autotune_gemm:
                yield from super().preprocess_mm_configs(m, n, k, configs, *args, **kwargs)
                return
            yield from self._finalize_mm_configs([_default_gemm_config(m, n, k)])

    def _default_gemm_config(m, n, k) -> GemmConfig:
        """One tile for a problem: as large as the problem (rounded up to a power of two, at
        least 16) up to 128 x 128 x 64. Larger tiles mean fewer programs and fewer K steps, which
        is what the interpreter's run time follows; 128x128 fp32 accumulator plus the A and B
        tiles stay far below the LX budget. Dynamic sizes use their hints."""
        def hint(x, lo, hi):
            v = V.graph.sizevars.optimization_hint(x, fallback=hi)
            return max(lo, min(hi, next_power_of_2(max(int(v), 1))))
        if V.graph.sizevars.optimization_hint(m, fallback=128) <= 16:
            return decode_configs.skinny_gemm_config(
                m, n, k, hint, GemmConfig, size=lambda x: V.graph.sizevars.optimization_hint(x, fallback=512))
        return GemmConfig(hint(m, 16, 128), hint(n, 16, 128), hint(k, 16, 64), 1, 4)

    @register_template_heuristic(mm_template.uid, DEVICE)
    @register_template_heuristic(bmm_template.uid, DEVICE)
    class SpyreMMTemplateConfigHeuristic(MMTemplateConfigMixin, SpyreConfigHeuristic):
        """mm and bmm Triton templates on spyre."""

        def should_run(self, inputs) -> bool:
            return True  # not only under max-autotune: see the docstring above

    @register_template_heuristic(mm_template.uid, DEVICE, op_name="addmm")
    @register_template_heuristic(bmm_template.uid, DEVICE, op_name="baddbmm")
    class SpyreAddMMTemplateConfigHeuristic(AddMMConfigMixin, SpyreMMTemplateConfigHeuristic):
        """addmm and baddbmm Triton templates on spyre (alpha/beta epilogue)."""

    globals().update(SpyreConfigHeuristic=SpyreConfigHeuristic,
                     SpyreMMTemplateConfigHeuristic=SpyreMMTemplateConfigHeuristic,
                     SpyreAddMMTemplateConfigHeuristic=SpyreAddMMTemplateConfigHeuristic)


# --- matmuls become Triton templates in every mode -----------------------------------------------

_GEMM_OPS = {"mm": "mm", "addmm": "mm", "bmm": "bmm", "baddbmm": "bmm"}


def _sources_digest() -> str:
    """A digest of this package's modules: part of Inductor's FX-graph cache key (through
    `SpyreChoices.uuid`), so graphs cached under other lowering decisions are not reused."""
    global _digest
    if _digest is None:
        import hashlib
        import os
        h = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(__file__))
        for name in sorted(n for n in os.listdir(here) if n.endswith(".py")):
            with open(os.path.join(here, name), "rb") as f:
                h.update(f.read())
        _digest = h.hexdigest()[:16]
    return _digest


_digest = None
def _make_choices_class():
    """Inductor's choices handler (`torch._inductor.choices.InductorChoices`) is the documented
    way to change its heuristics from out of tree (`config.inductor_choices_class`). For spyre
    devices only, this one changes which implementations a matmul lowering may pick from:

    - By default (no max-autotune) Inductor lowers mm/addmm/bmm/baddbmm to extern aten calls,
      which on spyre run on the host CPU through the eager fallback. On spyre the lowering gets
      Inductor's Triton template instead (mm_template or bmm_template, with the one block size
      the spyre heuristic gives outside max-autotune), so nothing is benchmarked and the matmul,
      with its fused epilogue, runs as a Triton kernel on the accelerator.
    - Under max-autotune the extern aten choices are dropped on spyre: they would be timed on the
      host CPU against kernels timed on the simulator, and always win.

    The aten choice stays where no Triton template applies (integer matmuls, `out_dtype`,
    zero-size problems, max_autotune_gemm_backends without TRITON); such a matmul runs on the host
    and `inductor` warns about it (see `SpyreWrapperCodegen`). Every other device gets
    Inductor's own choices."""
    from torch._inductor import config as inductor_config
    from torch._inductor import ir
    from torch._inductor.choices import InductorChoices
    from torch._inductor.kernel.bmm import bmm_template
    from torch._inductor.kernel.mm import mm_template
    from torch._inductor.kernel.mm_common import _is_static_problem
    from torch._inductor.kernel_inputs import MMKernelInputs
    from torch._inductor.select_algorithm import ExternKernelChoice, realize_inputs
    from torch._inductor.utils import use_triton_template

    templates_for = {"mm": mm_template, "bmm": bmm_template}

    def spyre_gemm_templates(kernel_inputs, templates, op_name):
        layout = kernel_inputs.output_layout()
        if (not isinstance(kernel_inputs, MMKernelInputs) or kernel_inputs._out_dtype is not None
                or not use_triton_template(layout, check_max_autotune=False)
                or not _is_static_problem(layout)[1]):
            return kernel_inputs, templates
        triton = [t for t in templates if not isinstance(t, ExternKernelChoice)]
        if inductor_config.max_autotune or inductor_config.max_autotune_gemm:
            # Inductor offers the Triton templates (in this call or, for addmm, a sibling one).
            return kernel_inputs, triton
        if not triton:
            triton = [templates_for[_GEMM_OPS[op_name]]]
            if op_name == "addmm":
                # The aten-only call passes the bias unexpanded; the template's epilogue reads
                # it at the output's indices, as tuned_addmm's max-autotune path gives it.
                from torch._inductor.lowering import expand
                inp, mat1, mat2 = kernel_inputs.nodes()
                if not isinstance(inp, ir.TensorBox):
                    inp = ir.TensorBox(inp)
                inp = realize_inputs(expand(inp, layout.size))
                kernel_inputs = MMKernelInputs([inp, mat1, mat2], scalars=kernel_inputs._scalars)
        return kernel_inputs, triton

    class SpyreChoices(InductorChoices):
        def get_template_configs(self, kernel_inputs, templates, op_name, kwarg_overrides=None):
            if kernel_inputs.device_type == DEVICE and op_name in _GEMM_OPS:
                spyre_inputs, spyre_templates = spyre_gemm_templates(kernel_inputs, templates, op_name)
                choices = super().get_template_configs(spyre_inputs, spyre_templates, op_name, kwarg_overrides)
                if choices:
                    return choices
                # The template made no kernel for this problem (an empty inner dimension, [2,0] @ [0,2],
                # gives none): Inductor's own choices, the aten call among them, so there is always one.
            return super().get_template_configs(kernel_inputs, templates, op_name, kwarg_overrides)

        def _need_to_fix_layout(self, adjusted_choices, op_name) -> bool:
            # A Triton template writes the layout it was generated for: fix it (as Inductor
            # does under max-autotune) rather than leave it flexible as for aten-only choices.
            if adjusted_choices and adjusted_choices[0].inputs.device_type == DEVICE and any(
                    not isinstance(c.template, ExternKernelChoice) for c in adjusted_choices):
                return True
            return super()._need_to_fix_layout(adjusted_choices, op_name)

        def uuid(self) -> str:
            return f"spyre-{_sources_digest()}"

    SpyreChoices.__module__ = __name__
    return SpyreChoices


_choices_cls = None


def spyre_choices():
    """Factory for `torch._inductor.config.inductor_choices_class` (called per compiling thread)."""
    global _choices_cls
    if _choices_cls is None:
        _choices_cls = _make_choices_class()
        globals()["SpyreChoices"] = _choices_cls
    return _choices_cls()


def _register_choices(mod) -> None:
    if mod.inductor_choices_class is None:
        mod.inductor_choices_class = spyre_choices
    elif mod.inductor_choices_class is not spyre_choices:
        warnings.warn("spyre: torch._inductor.config.inductor_choices_class is already set, so "
                      "matmuls compiled for spyre may run on the host CPU", RuntimeWarning, stacklevel=2)
