"""spyreccl under bad input and failures: ranks that disagree, wrong devices, a dead rank, and many
collectives without a leak. Each test runs 2 processes."""
import os
import time

import pytest
import torch
import torch.distributed as dist

from spyre_triton.distributed.backend import _HeldWorks
from spyreccl_harness import spawn


def card(rank):
    return f"spyre:{rank}"


def check_disagreements_raise_on_every_rank(rank, world):
    cases = [
        ("shape", lambda: dist.all_reduce(torch.ones(4 if rank == 0 else 8, device=card(rank))),
         r"all_reduce on rank \d: the ranks disagree \(rank 0: all_reduce of 4 float32 elements; "
         r"rank 1: all_reduce of 8 float32 elements\)"),
        ("dtype", lambda: dist.all_reduce(torch.ones(4, dtype=torch.float32 if rank == 0 else torch.int32,
                                                     device=card(rank))),
         "rank 0: all_reduce of 4 float32 elements; rank 1: all_reduce of 4 int32 elements"),
        ("collective", lambda: dist.all_reduce(torch.ones(4, device=card(rank))) if rank == 0
         else dist.broadcast(torch.ones(4, device=card(rank)), src=0),
         "rank 0: all_reduce of 4 float32 elements; rank 1: broadcast of 4 float32 elements"),
        ("splits", lambda: dist.all_to_all_single(torch.zeros(4, device=card(rank)), torch.ones(4, device=card(rank)),
                                                  [2, 2], [1, 3] if rank == 0 else [2, 2]),
         "all_to_all_single on rank .: the ranks disagree"),
        ("gather size", lambda: dist.all_gather_into_tensor(torch.zeros(2 * (3 + rank), device=card(rank)),
                                                            torch.ones(3 + rank, device=card(rank))),
         "rank 0: all_gather_single of 3 float32 elements; rank 1: all_gather_single of 4 float32 elements"),
    ]
    spyreccl = dist.group.WORLD  # with backend="spyreccl", the group is the backend itself
    assert (spyreccl._board is not None) == (os.environ.get("SPYRE_CCL_BOARD") != "0")  # the path under test
    for what, run, message in cases:
        with pytest.raises(RuntimeError, match=message):
            run()
    t = torch.full((3,), float(rank), device=card(rank))  # the group still works afterwards
    dist.all_reduce(t)
    assert t.cpu().tolist() == [1.0, 1.0, 1.0]


def check_wrong_devices(rank, world):
    t = torch.ones(2, device=card(rank))
    dist.all_reduce(t)  # binds this rank to its card
    other = torch.ones(2, device=card(1 - rank))
    with pytest.raises(ValueError, match=f"got a tensor on spyre:{1 - rank}, but this rank's card is spyre:{rank}"):
        dist.all_reduce(other)
    with pytest.raises(ValueError, match="mixes devices"):
        dist.all_gather([torch.zeros(2), torch.zeros(2)], t)
    with pytest.raises(ValueError, match="got a CPU tensor; this process group serves spyre tensors only"):
        dist.broadcast(torch.ones(2), src=0)
    with pytest.raises(ValueError, match="needs contiguous tensors"):
        dist.all_reduce(torch.ones(4, 4, device=card(rank)).t())
    with pytest.raises(TypeError, match="AVG needs a floating-point tensor"):
        dist.all_reduce(torch.ones(2, dtype=torch.int32, device=card(rank)), op=dist.ReduceOp.AVG)
    with pytest.raises(TypeError, match="BAND needs an integer or bool tensor"):
        dist.all_reduce(t, op=dist.ReduceOp.BAND)
    dist.all_reduce(t)
    assert t.cpu().tolist() == [4.0, 4.0]  # two sums of ones: every refusal above left t alone


def check_point_to_point_mismatches_raise_on_the_receiver(rank, world):
    # gloo alone aborts the receiving process on a longer message and half-fills a longer buffer
    sent = torch.arange(8, dtype=torch.float32, device=card(rank))
    for what, buf, message in [
            ("longer message", torch.zeros(4, device=card(rank)), "rank 0 sent 8 float32 elements, but this rank's "
             "receive holds 4 float32 elements"),
            ("shorter message", torch.zeros(16, device=card(rank)), "holds 16 float32 elements"),
            ("dtype", torch.zeros(8, dtype=torch.int32, device=card(rank)), "holds 8 int32 elements")]:
        if rank == 0:
            dist.send(sent, dst=1)
        else:
            with pytest.raises(RuntimeError, match=f"spyreccl: recv failed on rank 1 of 2: .*{message}"):
                dist.recv(buf, src=0)
            assert not buf.cpu().any(), what  # nothing of the message landed
    buf = torch.zeros(8, device=card(rank))  # the pair still matches messages as they were sent
    if rank == 0:
        dist.send(sent * 2, dst=1)
    else:
        dist.recv(buf, src=0)
        assert buf.cpu().tolist() == [2.0 * i for i in range(8)]
    with pytest.raises(ValueError, match=r"tag 1073741824 is outside \[0, 2\*\*30\)"):
        dist.send(sent, dst=1 - rank, tag=1 << 30)


def check_receives_waited_out_of_order_match_in_program_order(rank, world):
    if rank == 0:
        for k in range(3):
            dist.send(torch.full((4 + k,), float(k), device=card(rank)), dst=1)
    else:
        bufs = [torch.zeros(4 + k, device=card(rank)) for k in range(3)]
        works = [dist.irecv(b, src=0) for b in bufs]
        for w in reversed(works):
            w.wait()
        assert [b.cpu().tolist() for b in bufs] == [[float(k)] * (4 + k) for k in range(3)]


@pytest.mark.parametrize("check", [check_disagreements_raise_on_every_rank, check_wrong_devices,
                                   check_point_to_point_mismatches_raise_on_the_receiver,
                                   check_receives_waited_out_of_order_match_in_program_order],
                         ids=["disagreements", "wrong_devices", "p2p_mismatch", "p2p_order"])
def test_bad_input(check):
    spawn(check)


def test_disagreements_raise_through_gloo_too():
    """Ranks on different hosts agree in a gloo all_gather instead of the shared-memory board."""
    spawn(check_disagreements_raise_on_every_rank, SPYRE_CCL_BOARD="0")


TIMEOUT_S = 10


def check_dead_rank(rank, world):
    t = torch.ones(1 << 12, device=card(rank))
    dist.all_reduce(t)
    if rank == 1:
        os._exit(0)  # dies without a word: no destroy_process_group
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="spyreccl: all_reduce failed on rank 0 of 2") as e:
        dist.all_reduce(t)
    assert time.monotonic() - start < TIMEOUT_S + 5, e.value


def test_dead_rank_fails_the_others_within_the_timeout():
    spawn(check_dead_rank, backend="spyreccl", timeout_s=TIMEOUT_S)


def rss_bytes():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def check_no_leak(rank, world):
    from spyre_triton import _runtime as rt
    t = torch.ones(16384, device=card(rank))
    out = torch.zeros(2 * 16384, device=card(rank))
    for _ in range(50):  # warm up: gloo's buffers, allocator caches
        dist.all_reduce(t)
        dist.all_gather_into_tensor(out, t, async_op=True).get_future().wait()
    t.fill_(1)

    def settled():
        """Counts once the works spyreccl holds for a grace period after completion (backend._HeldWorks,
        a bounded set: those of the last half second) have been released by a later collective."""
        time.sleep(_HeldWorks.GRACE_S + 0.1)
        dist.barrier()
        return torch.spyre.memory_allocated(rank), rt.allocation_count(rank), rss_bytes()
    before = settled()
    for _ in range(500):
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        dist.all_gather_into_tensor(out, t, async_op=True).get_future().wait()
    after = settled()
    assert after[:2] == before[:2], (before, after)
    # a tensor kept per collective (64 KB) would grow RSS by 64 MiB; malloc's arenas for gloo's threads move it
    # by a few MiB either way on a loaded host (11 MiB seen once)
    assert after[2] - before[2] < 24 << 20, f"RSS grew by {(after[2] - before[2]) >> 20} MiB over 1000 collectives"
    assert t.cpu().eq(1).all()


def test_a_thousand_collectives_leak_nothing():
    spawn(check_no_leak)


class _FakeWork:
    """Stands in for a gloo Work: completes when told to."""

    def __init__(self):
        self.done = False

    def is_completed(self):
        return self.done


def test_gloo_works_are_released_by_python_only_after_a_grace_period(monkeypatch):
    """gloo's worker must never hold the last reference to a work (freeing it there needs the GIL, which
    aborts the process during interpreter shutdown): the backend keeps each work until GRACE_S after it
    was first seen complete, and releases it on a later collective's thread."""
    import weakref
    from spyre_triton.distributed import backend
    held = backend._HeldWorks()
    monkeypatch.setattr(held, "GRACE_S", 0.2)
    first = _FakeWork()
    alive = weakref.ref(held.hold(first))
    del first
    held.hold(_FakeWork())
    assert alive() is not None, "an incomplete work was released"
    alive().done = True
    held.hold(_FakeWork())  # first seen complete here: the grace period starts
    assert alive() is not None, "a work was released as soon as it completed"
    time.sleep(0.25)
    held.hold(_FakeWork())
    assert alive() is None, "a work was still held after its grace period"
    assert len(held._works) == 3
