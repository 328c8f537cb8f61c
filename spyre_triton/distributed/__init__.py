"""torch.distributed on spyre: the `spyreccl` c10d backend (docs/distributed.md).

`register()` (run when the device registers) makes `spyreccl` the backend of device type `spyre`, so
`init_process_group(backend="spyreccl")`, `init_process_group(backend="cpu:gloo,spyre:spyreccl")` and
`init_process_group()` all give a process group whose collectives take spyre tensors.
"""
from __future__ import annotations

BACKEND_NAME = "spyreccl"


def register() -> None:
    """Register `spyreccl` for device type `spyre` (idempotent; a no-op without torch.distributed)."""
    import torch.distributed as dist
    if not dist.is_available() or BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    from .backend import ProcessGroupSpyreCCL
    dist.Backend.register_backend(BACKEND_NAME, ProcessGroupSpyreCCL, devices=["spyre"])
