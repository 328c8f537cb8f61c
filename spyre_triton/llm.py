"""Warnings for the paths of text generation that silently skip compilation on spyre (docs/llm.md).

`torch.compile(model).generate(...)`: the compiled wrapper (Dynamo's OptimizedModule) hands attribute
lookups to the original module, so `generate` and every forward it calls run eagerly, op by op, mostly
as host fallbacks on spyre. That is torch and transformers behaviour on every device; on spyre it costs
orders of magnitude, so the first such lookup on a model with spyre parameters warns once.
"""
from __future__ import annotations

import warnings

_warned: set = set()


class SpyreUncompiledWarning(UserWarning):
    pass


def _on_spyre(module) -> bool:
    for p in module.parameters():
        return p.device.type == "spyre"
    return False


def warn_uncompiled_generate(opt_module) -> None:
    if "generate" in _warned or not _on_spyre(opt_module._orig_mod):
        return
    _warned.add("generate")
    warnings.warn(
        "torch.compile(model).generate(...) runs generate() and the model's forward uncompiled (eagerly, "
        "on the host for most ops): compile the forward instead, `model.forward = torch.compile(model.forward)`, "
        "then call model.generate(...) with cache_implementation='static' (docs/llm.md)",
        SpyreUncompiledWarning, stacklevel=3)


def patch_optimized_module(mod) -> None:
    """Hook on torch._dynamo.eval_frame: OptimizedModule.__getattr__ warns once for `generate`."""
    cls = mod.OptimizedModule
    getattr_ = cls.__getattr__

    def __getattr__(self, name):
        if name == "generate":
            warn_uncompiled_generate(self)
        return getattr_(self, name)

    cls.__getattr__ = __getattr__
