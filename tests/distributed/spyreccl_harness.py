"""Runs a check on 2 ranks (processes), each on its own card, under a spyreccl process group.

`spawn(check, backend)` starts the ranks with torch.multiprocessing, a FileStore under a fresh temporary
directory, and re-raises a rank's failure in the test. Checks are module-level functions (rank, world)."""
from __future__ import annotations

import os
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _rank_main(rank, world, init_file, backend, check, timeout_s, env):
    os.environ.update(env)
    torch.spyre.set_device(rank)
    kwargs = {} if backend is None else {"backend": backend}
    dist.init_process_group(init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s), **kwargs)
    try:
        check(rank, world)
    finally:
        dist.destroy_process_group()


def spawn(check, backend: str | None = "spyreccl", world: int = 2, timeout_s: float = 60, **env) -> None:
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_rank_main, args=(world, os.path.join(d, "store"), backend, check, timeout_s, env),
                 nprocs=world, join=True)
