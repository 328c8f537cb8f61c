"""Shared by every test layer (runtime, compiler, language, torch, inductor, perf, distributed).

Test modules import `DEVICE` from here (`from conftest import DEVICE`): it is needed at import
time, in parametrize lists and module-level tensors, where a fixture cannot reach. pyproject.toml
puts this folder on sys.path (`pythonpath`), so `asm_helpers` and this module import from every
layer's folder; a script a test starts in a subprocess gets the same path from `TESTS_DIR`.
"""
import os

import triton

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

# The torch device Triton launches on: spyre:0 (the backend's driver is the only one active).
DEVICE = triton.runtime.driver.active.get_active_torch_device()


class Address:
    """A pointer argument that outlives its tensor: what a saved data_ptr() in user code amounts to."""

    def __init__(self, addr, dtype=None):
        import torch
        self.addr, self.dtype = addr, dtype or torch.float32

    def data_ptr(self):
        return self.addr
