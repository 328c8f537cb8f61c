"""The shared-memory board on which spyreccl's ranks agree before each collective (distributed/board.py).

Ranks are threads here, over one in-process store: the board is the same file mapped twice, which is
what two processes on one host see. The process-level checks (disagreements raising on every rank, a
dead rank failing the others) are in test_spyreccl_faults.py, which runs through the board."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
import torch.distributed as dist

from spyre_triton.distributed import board

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm on this host: spyreccl's ranks agree through gloo "
                                "(test_spyreccl_faults.py runs that path)")


def on_threads(fn, size=2):
    """fn(rank) on `size` threads; their results in rank order (a thread's exception is re-raised)."""
    out, errors = [None] * size, []

    def run(r):
        try:
            out[r] = fn(r)
        except BaseException as e:  # noqa: BLE001 (handed to the test)
            errors.append(e)
    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return out


def attach_all(size=2, width=7, timeout_s=30.0):
    store = dist.HashStore()
    return on_threads(lambda r: board.attach(store, r, size, width, timedelta(seconds=timeout_s)), size)


def test_ranks_read_each_others_statements_in_order(monkeypatch):
    made = []

    def mkstemp(**kw):
        fd, path = real_mkstemp(**kw)
        made.append(path)
        return fd, path
    real_mkstemp = board.tempfile.mkstemp
    monkeypatch.setattr(board.tempfile, "mkstemp", mkstemp)
    boards = attach_all(size=3)
    assert all(b is not None for b in boards)
    assert len(made) == 1 and made[0].startswith("/dev/shm/spyreccl-")
    assert not os.path.exists(made[0]), "the board's file must be unlinked once mapped"
    for seq in range(1, 6):  # both rows of each rank, reused
        got = on_threads(lambda r: boards[r].exchange(seq, [seq, r, 10 * r]), size=3)
        assert got == [[[seq, r, 10 * r] for r in range(3)]] * 3


def test_a_rank_may_run_one_collective_ahead():
    """Rank 0 posts seq 2 while rank 1 is still reading seq 1's rows: seq 2 has its own row."""
    b0, b1 = attach_all()
    first = threading.Event()

    def rank0():
        a = b0.exchange(1, [1])
        first.set()
        return a, b0.exchange(2, [2])

    def rank1():
        a = b1.exchange(1, [1])
        first.wait(10)
        return a, b1.exchange(2, [2])
    r0, r1 = on_threads(lambda r: (rank0, rank1)[r]())
    assert r0 == r1 == ([[1], [1]], [[2], [2]])


def test_a_missing_rank_times_out_naming_it():
    b0, _ = attach_all(timeout_s=0.5)
    with pytest.raises(RuntimeError, match=r"timed out after 0.5 s waiting for rank 1"):
        b0.exchange(1, [7])


def test_a_dead_rank_is_named_before_the_timeout():
    b0, b1 = attach_all(timeout_s=60)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    b1._pids[1] = dead.pid  # rank 1's process has exited
    with pytest.raises(RuntimeError, match=rf"rank 1 \(pid {dead.pid}\) has exited"):
        b0.exchange(1, [7])


def test_ranks_on_different_hosts_keep_gloo(monkeypatch):
    store = dist.HashStore()
    names = iter(["host-a|boot", "host-b|boot"])
    lock = threading.Lock()

    def identity():
        with lock:
            return next(names)
    monkeypatch.setattr(board, "_host_identity", identity)
    assert on_threads(lambda r: board.attach(store, r, 2, 7, timedelta(seconds=30))) == [None, None]


def test_a_rank_that_cannot_map_the_file_keeps_every_rank_on_gloo(monkeypatch):
    store = dist.HashStore()
    real_open = os.open

    def refuse_rank1(path, flags, *a):
        if threading.current_thread().name.endswith("rank1") and "spyreccl-" in str(path):
            raise PermissionError(path)
        return real_open(path, flags, *a)
    monkeypatch.setattr(board.os, "open", refuse_rank1)

    def attach(r):
        threading.current_thread().name = f"rank{r}"
        return board.attach(store, r, 2, 7, timedelta(seconds=30))
    assert on_threads(attach) == [None, None]
