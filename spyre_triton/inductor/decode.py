"""Registrations for LLM decode: launch graphs under mode="reduce-overhead", and a warning where
generation would silently run uncompiled (spyre_triton/graphs.py and spyre_triton/llm.py do the work)."""
from __future__ import annotations


def _register_graph_policy(mod) -> None:
    """mode="reduce-overhead" on spyre replays launch graphs (spyre_triton/graphs.py says how). Installed
    when cudagraph_utils (the policy's base class) is imported: output_code imports it before any graph
    reaches post_compile."""
    from torch._inductor import config

    from spyre_triton import graphs
    graphs.allow_single_spyre_device(mod)
    if config.cudagraph_policy is None:
        config.cudagraph_policy = graphs.policy()


def _warn_uncompiled_generate(mod) -> None:
    from spyre_triton import llm
    llm.patch_optimized_module(mod)
