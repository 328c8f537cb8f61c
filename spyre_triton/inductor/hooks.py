"""The post-import hook: each registration runs right after the Inductor module it registers
with has executed, so `register()` imports nothing of Dynamo or Inductor."""
from __future__ import annotations

import importlib.abc
import sys
import threading
import traceback
import warnings
from typing import Any, Callable

from .benchmarker import _register_benchmarker
from .choices import _register_choices, _register_template_heuristics
from .codegen import _register_backend
from .decode import _register_graph_policy, _warn_uncompiled_generate
from .device import _register_device_interface, _register_device_op_overrides

# --- the post-import hook ----------------------------------------------------------------------

def _compat(name: str) -> Callable[[Any], None]:
    def run(mod):
        from spyre_triton.inductor import compat
        getattr(compat, name)(mod)
    run.__name__ = name
    return run


# module -> registrations to run once it has executed (in this order)
_HOOKS: dict[str, list[Callable[[Any], None]]] = {
    "torch.utils._triton": [_compat("patch_has_triton")],
    "torch._inductor.utils": [_compat("add_gpu_type"), _compat("patch_is_big_gpu")],
    "torch._inductor.runtime.triton_helpers": [_compat("patch_set_driver_to_gpu")],
    "torch._dynamo.device_interface": [_register_device_interface],
    "torch._inductor.codegen.common": [_register_device_op_overrides],
    "torch._inductor.codegen.triton": [_register_backend],
    "torch._inductor.runtime.benchmarking": [_register_benchmarker],
    "torch._inductor.runtime.triton_heuristics": [_compat("patch_reduction_configs")],
    "torch._inductor.template_heuristics.triton": [_register_template_heuristics],
    "torch._inductor.config": [_register_choices],
    "torch._inductor.cudagraph_utils": [_register_graph_policy],
    "torch._inductor.decomposition": [_compat("add_spyre_decompositions")],
    "torch._inductor.lowering": [_compat("sort_ops_on_device")],
    "torch._dynamo.eval_frame": [_warn_uncompiled_generate],
}
_done: set[str] = set()
_lock = threading.RLock()
_registered = False


def _run_hooks(name: str, mod) -> None:
    with _lock:
        if name in _done:
            return
        _done.add(name)
    for hook in _HOOKS[name]:
        try:
            hook(mod)
        except Exception:  # a failed registration must not break `import torch._inductor`
            warnings.warn(f"spyre: registering with {name} failed ({hook.__name__}); torch.compile on "
                          f"spyre will not work:\n{traceback.format_exc()}", RuntimeWarning, stacklevel=2)
    if len(_done) == len(_HOOKS) and _finder in sys.meta_path:  # all done: stop watching imports
        try:
            sys.meta_path.remove(_finder)
        except ValueError:
            pass


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a hooked module it asks the other finders for the spec and wraps
    that loader's exec_module so the registrations run right after the module body."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _HOOKS or fullname in _done:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _run_hooks(fullname, module)

        loader.exec_module = exec_then_register  # this loader instance serves this one module
        return spec


_finder = _PostImportFinder()


def register() -> None:
    """Make torch.compile/Inductor target spyre (idempotent, cheap: nothing of Dynamo or Inductor
    is imported here). Called by spyre_triton.device.register()."""
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
        if _finder not in sys.meta_path and len(_done) < len(_HOOKS):
            sys.meta_path.insert(0, _finder)
    for name in _HOOKS:  # modules imported before the device registered
        mod = sys.modules.get(name)
        if mod is not None:
            _run_hooks(name, mod)
