"""The ranks' agreement before a collective, through shared memory when every rank runs on this host.

spyreccl's ranks state the collective, dtype and element counts they are about to run and compare them
(backend.ProcessGroupSpyreCCL._agree), because gloo aborts the process on a size mismatch. Through gloo,
that statement is one more all_gather: a TCP round trip (~0.4 ms on a 2-core host), which is what made a
checked 1 MB all_reduce 1.5-1.9x gloo's own time. Ranks on one host can post their statements on a board
in shared memory instead and read each other's: microseconds when the ranks arrive together.

The board is a file in /dev/shm mapped by every rank of the group, then unlinked (the mappings keep it;
nothing is left behind when a process dies). It holds each rank's pid and two rows per rank, used by
collectives of even and odd sequence numbers. A rank writes its row as: head = -1, the statement,
tail = seq, head = seq; a reader takes a row whose head and tail both equal its seq (x86 keeps stores in
order, so the statement is complete). Two rows suffice: a rank can post collective seq + 2 only after
every rank has posted seq + 1, which each does only after it has read everyone's seq.

Groups whose ranks span hosts, or that cannot map the file, keep the gloo all_gather (`attach` returns
None): the agreement then works exactly as torch.distributed runs, across hosts.
"""
from __future__ import annotations

import mmap
import os
import socket
import tempfile
import time
from datetime import timedelta

import numpy as np

_SHM_DIR = "/dev/shm"
_KEY = "spyreccl/board/"


def _host_identity() -> str:
    """Ranks that print the same identity share /dev/shm: the host's name and boot."""
    try:
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}|{boot}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Board:
    """One group's board: `exchange(seq, statement)` posts this rank's statement for collective `seq` and
    returns every rank's, in rank order."""

    def __init__(self, mm: mmap.mmap, rank: int, size: int, width: int, timeout: timedelta):
        self._mm = mm
        words = np.ndarray((len(mm) // 8,), dtype=np.int64, buffer=mm)
        self._pids = words[1:1 + size]
        self._rows = words[1 + size:1 + size + 2 * size * (width + 2)].reshape(2, size, width + 2)
        self.rank, self.size, self.width = rank, size, width
        self._timeout_s = timeout.total_seconds()
        self._pids[rank] = os.getpid()

    @staticmethod
    def nbytes(size: int, width: int) -> int:
        return 8 * (1 + size + 2 * size * (width + 2))

    def exchange(self, seq: int, statement: list[int]) -> list[list[int]]:
        rows = self._rows[seq & 1]
        row = rows[self.rank]
        row[0] = -1
        row[2:2 + len(statement)] = statement
        row[1] = seq
        row[0] = seq
        out: list = [None] * self.size
        pending = list(range(self.size))
        start = time.monotonic()
        polls = 0
        while True:
            still = []
            for r in pending:
                if rows[r, 0] == seq and rows[r, 1] == seq:
                    out[r] = rows[r, 2:2 + len(statement)].tolist()
                else:
                    still.append(r)
            if not still:
                return out
            pending = still
            polls += 1
            if polls < 64:
                continue  # the ranks usually arrive within microseconds of each other
            if polls < 1024:
                os.sched_yield()  # let a late rank on a shared core run
                continue
            time.sleep(5e-4)
            if polls % 64 == 0:
                self._check_peers(pending, start)

    def _check_peers(self, pending: list[int], start: float) -> None:
        dead = [r for r in pending if not _alive(int(self._pids[r]))]
        if dead:
            raise RuntimeError(f"rank {dead[0]} (pid {int(self._pids[dead[0]])}) has exited")
        if time.monotonic() - start > self._timeout_s:
            raise RuntimeError(f"timed out after {self._timeout_s:g} s waiting for rank "
                               f"{', '.join(map(str, pending))}")

    def close(self) -> None:
        self._pids = self._rows = None
        try:
            self._mm.close()
        except BufferError:  # a numpy view still refers to it: the mapping goes with the process
            pass


def attach(store, rank: int, size: int, width: int, timeout: timedelta) -> Board | None:
    """The group's board, made by rank 0 and mapped by every rank, or None on every rank when the ranks are
    not all on this host or any of them cannot map it. Collective: every rank of the group calls it."""
    store.set(f"{_KEY}host/{rank}", _host_identity())
    hosts = {store.get(f"{_KEY}host/{r}").decode() for r in range(size)}
    if len(hosts) != 1 or not os.path.isdir(_SHM_DIR):
        return None
    nbytes = Board.nbytes(size, width)
    token = int.from_bytes(os.urandom(7), "little")
    path, mm = None, None
    try:
        if rank == 0:
            fd, path = tempfile.mkstemp(prefix="spyreccl-", dir=_SHM_DIR)
            try:
                os.ftruncate(fd, nbytes)
                mm = mmap.mmap(fd, nbytes)
            finally:
                os.close(fd)
            np.ndarray((1,), dtype=np.int64, buffer=mm)[0] = token
            store.set(f"{_KEY}path", f"{path}|{token}")
        else:
            path, want = store.get(f"{_KEY}path").decode().rsplit("|", 1)
            try:
                fd = os.open(path, os.O_RDWR)
                try:
                    mm = mmap.mmap(fd, nbytes)
                finally:
                    os.close(fd)
                if int(np.ndarray((1,), dtype=np.int64, buffer=mm)[0]) != int(want):
                    mm.close()
                    mm = None  # another host's /dev/shm under the same name
            except (OSError, ValueError):
                mm = None
        store.add(f"{_KEY}ok", 1 if mm is not None else 0)
        if store.add(f"{_KEY}arrived", 1) == size:
            store.set(f"{_KEY}all", "1")
        store.get(f"{_KEY}all")  # every rank has mapped it (or failed to): the file can go
        ok = store.add(f"{_KEY}ok", 0)
    finally:
        if rank == 0 and path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass
    if ok != size:
        if mm is not None:
            mm.close()
        return None
    return Board(mm, rank, size, width, timeout)
