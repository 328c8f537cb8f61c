"""Inductor's Triton scheduling and Python wrapper, registered for spyre, with the hooks that
feed `diagnostics`: host-fallback warnings and kernel origins."""
from __future__ import annotations

import contextlib
import weakref

from .device import DEVICE
from .diagnostics import _graph_host_ops, _origin_lines, warn_host_ops


# Per graph: (index, variable, numel, dimensions) -> BlockPatternMatcher's match or None.
_block_matches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def _memoised_block_matches(matcher, graph):
    """Inductor's n-d tiling matches each memory dependency's index against a block pattern with
    sympy's `match`, about 0.1 s a call at four dimensions, and the scheduler asks for a tiling
    again for every pair of nodes it considers fusing. Bicubic interpolation's graph made 2,000
    such calls: 320 s of compile. The match depends only on its arguments and the graph's size
    facts, so within one graph it is remembered."""
    original = matcher.__dict__["match_mod_div_block_expr"]
    memo = _block_matches.setdefault(graph, {})

    def match(cls, index, index_var, numel, num_dims):
        key = (index, index_var, numel, num_dims)
        if key not in memo:
            memo[key] = original.__func__(cls, index, index_var, numel, num_dims)
        found = memo[key]
        return None if found is None else tuple(list(part) for part in found)

    matcher.match_mod_div_block_expr = classmethod(match)
    try:
        yield
    finally:
        matcher.match_mod_div_block_expr = original


def _register_backend(mod) -> None:
    # Runs when torch._inductor.codegen.triton has executed (it imports .wrapper), which is inside
    # init_backend_registration() before it looks for a PrivateUse1 backend, or earlier.
    import sympy
    from torch._inductor import config as inductor_config
    from torch._inductor.codegen.block_analysis import BlockPatternMatcher
    from torch._inductor.codegen.common import register_backend_for_device
    from torch._inductor.codegen.triton import TritonScheduling
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen
    from torch._inductor.virtualized import V

    class SpyreWrapperCodegen(PythonWrapperCodegen):
        """Inductor's Python wrapper plus one header line: when the graph calls ops on the host
        (Inductor had no kernel for them on spyre), the generated module names them to
        `warn_host_ops` as it loads. The wrapper is created once the graph is lowered, so the
        ops are known; the warning also fires when the module comes from Inductor's cache."""

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:
                try:
                    warn_host_ops(_graph_host_ops(V.graph))
                except Exception:  # an account, never a reason for a compile to fail
                    pass
                return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper,
                                                   partition_signatures)
            return SpyreWrapperCodegen()

        def __init__(self, *args, **kwargs):
            self.spyre_kernel_origins: dict[str, list[str]] = {}
            super().__init__(*args, **kwargs)

        def generate_end(self, result) -> None:
            super().generate_end(result)
            if self.spyre_kernel_origins:
                result.writeline("from spyre_triton.inductor import with_kernel_origins")
                result.writeline(f"call = with_kernel_origins(call, {self.spyre_kernel_origins!r})")

        def write_header(self) -> None:
            super().write_header()
            try:
                ops = _graph_host_ops(V.graph)
            except Exception:
                ops = []
            if ops:
                self.header.writeline("from spyre_triton.inductor import warn_host_ops")
                self.header.writeline(f"warn_host_ops({ops!r})  # ops this graph runs on the host CPU")

    class SpyreScheduling(TritonScheduling):
        """Inductor's Triton scheduling with two changes. It notes for each kernel it defines the
        model source lines (FX nodes' stack traces, as Dynamo recorded them) of the ops fused into
        it, for error messages (see `with_kernel_origins`). And pointwise kernels are tiled along
        the dimensions their indexing implies (`prefer_nd_tiling`), so that a permuted or
        broadcast read is affine in each tile dimension: the compiler makes it one strided DMA.
        Flat, a tile of XBLOCK elements crosses rows at every multiple of the row length, and the
        index is `xindex // n`, `xindex % n` per element and a gather: Llama's decode step reads
        its KV cache transposed that way (a 25-long row: 245 us a launch flat, 41 us tiled)."""

        @classmethod
        def get_tiling_and_scores(cls, node_schedule, numel, reduction_numel=sympy.S.One,
                                  coalesce_analysis=None):
            if reduction_numel != 1 or inductor_config.triton.prefer_nd_tiling:
                return super().get_tiling_and_scores(node_schedule, numel, reduction_numel,
                                                     coalesce_analysis)
            with inductor_config.patch({"triton.prefer_nd_tiling": True}), \
                    _memoised_block_matches(BlockPatternMatcher, V.graph):
                return super().get_tiling_and_scores(node_schedule, numel, reduction_numel,
                                                     coalesce_analysis)

        def define_kernel(self, src_code, node_schedule, kernel):
            name = super().define_kernel(src_code, node_schedule, kernel)
            table = getattr(V.graph.wrapper_code, "spyre_kernel_origins", None)
            if table is not None:
                try:
                    lines = _origin_lines(node_schedule)
                    if lines:
                        table.setdefault(name, lines)
                except Exception:  # an aid to debugging, never a reason for a compile to fail
                    pass
            return name

    register_backend_for_device(DEVICE, SpyreScheduling, SpyreWrapperCodegen)
    globals().update(SpyreWrapperCodegen=SpyreWrapperCodegen, SpyreScheduling=SpyreScheduling)
