"""The spyreccl backend: every collective on spyre tensors over 2 ranks, against results computed on the
CPU from every rank's inputs. Each test runs its checks in one pair of processes (start-up dominates)."""
import time

import pytest
import torch
import torch.distributed as dist

from spyreccl_harness import spawn

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.int8, torch.uint8]


def data(rank, shape=(6, 5), dtype=torch.float32, salt=0):
    """Rank r's input: small integers (exact in every dtype, sums and products too)."""
    g = torch.Generator().manual_seed(1000 * salt + rank)
    return torch.randint(1, 4, shape, generator=g).to(dtype)


def on_card(t):
    return t.to(f"spyre:{torch.spyre.current_device()}")


def check_all_reduce_every_op_and_dtype(rank, world):
    R = dist.ReduceOp
    for dtype in DTYPES:
        ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
        ops += [R.AVG] if dtype.is_floating_point else [R.BAND, R.BOR, R.BXOR]
        for salt, op in enumerate(ops):
            xs = [data(r, dtype=dtype, salt=salt) for r in range(world)]
            ref = {R.SUM: lambda: sum(xs), R.PRODUCT: lambda: xs[0] * xs[1], R.MIN: lambda: torch.minimum(*xs),
                   R.MAX: lambda: torch.maximum(*xs), R.AVG: lambda: (xs[0] + xs[1]) / 2,
                   R.BAND: lambda: xs[0] & xs[1], R.BOR: lambda: xs[0] | xs[1], R.BXOR: lambda: xs[0] ^ xs[1]}[op]()
            t = on_card(xs[rank])
            dist.all_reduce(t, op=op)
            assert t.device == torch.device("spyre", rank) and t.dtype == dtype
            torch.testing.assert_close(t.cpu(), ref.to(dtype), msg=f"all_reduce {op} {dtype}")
    # bool: SUM/MAX are a logical or, PRODUCT/MIN a logical and, as gloo and NCCL define them
    g = torch.Generator().manual_seed(9)
    bs = [torch.randint(0, 2, (5, 7), generator=g).bool() for _ in range(world)]
    for op, ref in [(R.SUM, bs[0] | bs[1]), (R.MAX, bs[0] | bs[1]), (R.MIN, bs[0] & bs[1]),
                    (R.PRODUCT, bs[0] & bs[1]), (R.BXOR, bs[0] ^ bs[1])]:
        t = on_card(bs[rank])
        dist.all_reduce(t, op=op)
        assert t.dtype == torch.bool and torch.equal(t.cpu(), ref), f"all_reduce {op} bool"
    outs = [on_card(torch.zeros(5, 7, dtype=torch.bool)) for _ in range(world)]
    dist.all_gather(outs, on_card(bs[rank]))
    assert all(torch.equal(o.cpu(), b) for o, b in zip(outs, bs))


def check_rooted_and_gathering_collectives(rank, world):
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        xs = [data(r, dtype=dtype) for r in range(world)]
        t = on_card(xs[rank])
        dist.broadcast(t, src=1)
        assert torch.equal(t.cpu(), xs[1])

        t = on_card(xs[rank])
        dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
        if rank == 0:
            assert torch.equal(t.cpu(), xs[0] + xs[1])

        outs = [on_card(torch.zeros_like(xs[0])) for _ in range(world)]
        dist.all_gather(outs, on_card(xs[rank]))
        assert all(torch.equal(o.cpu(), x) for o, x in zip(outs, xs))

        for gather_fn in (dist.all_gather_into_tensor, dist.all_gather_single):
            out = on_card(torch.zeros(world * 6, 5, dtype=dtype))
            gather_fn(out, on_card(xs[rank]))
            assert torch.equal(out.cpu(), torch.cat(xs))

        ins = [data(r, dtype=dtype, salt=7) for r in range(world)]  # rank r's input, split in world chunks
        out = on_card(torch.zeros(3, 5, dtype=dtype))
        dist.reduce_scatter(out, [on_card(c) for c in ins[rank].chunk(world)])
        assert torch.equal(out.cpu(), (ins[0] + ins[1]).chunk(world)[rank])
        for rs_fn in (dist.reduce_scatter_tensor, dist.reduce_scatter_single):
            out = on_card(torch.zeros(3, 5, dtype=dtype))
            rs_fn(out, on_card(ins[rank]))
            assert torch.equal(out.cpu(), (ins[0] + ins[1]).chunk(world)[rank])
        if dtype.is_floating_point:
            out = on_card(torch.zeros(3, 5, dtype=dtype))
            dist.reduce_scatter_tensor(out, on_card(ins[rank]), op=dist.ReduceOp.AVG)
            torch.testing.assert_close(out.cpu(), ((ins[0] + ins[1]) / 2).chunk(world)[rank])

        gl = [on_card(torch.zeros_like(xs[0])) for _ in range(world)] if rank == 0 else None
        dist.gather(on_card(xs[rank]), gl, dst=0)
        if rank == 0:
            assert all(torch.equal(o.cpu(), x) for o, x in zip(gl, xs))

        out = on_card(torch.zeros_like(xs[0]))
        dist.scatter(out, [on_card(x) for x in xs] if rank == 1 else None, src=1)
        assert torch.equal(out.cpu(), xs[rank])


def check_all_to_all_uneven(rank, world):
    # rank r sends (r + 1) * (p + 1) rows to rank p
    send = [(rank + 1) * (p + 1) for p in range(world)]
    recv = [(p + 1) * (rank + 1) for p in range(world)]
    xs = [data(r, shape=(sum((r + 1) * (p + 1) for p in range(world)), 3), salt=3) for r in range(world)]
    out = on_card(torch.zeros(sum(recv), 3))
    dist.all_to_all_single(out, on_card(xs[rank]), output_split_sizes=recv, input_split_sizes=send)
    expect = torch.cat([xs[p].split([(p + 1) * (q + 1) for q in range(world)])[rank] for p in range(world)])
    assert torch.equal(out.cpu(), expect)

    ins = [on_card(c) for c in xs[rank].split(send)]
    outs = [on_card(torch.zeros(n, 3)) for n in recv]
    dist.all_to_all(outs, ins)
    assert torch.equal(torch.cat([o.cpu() for o in outs]), expect)


def check_point_to_point_and_barrier(rank, world):
    peer = 1 - rank
    for dtype in (torch.float16, torch.int32):
        mine = data(rank, dtype=dtype, salt=5)
        theirs = data(peer, dtype=dtype, salt=5)
        buf = on_card(torch.zeros_like(mine))
        if rank == 0:
            dist.send(on_card(mine), dst=1)
            dist.recv(buf, src=1)
        else:
            dist.recv(buf, src=0)
            dist.send(on_card(mine), dst=0)
        assert torch.equal(buf.cpu(), theirs)

        buf = on_card(torch.zeros_like(mine))
        works = [dist.isend(on_card(mine), dst=peer), dist.irecv(buf, src=peer)]
        for w in works:
            w.wait()
        assert torch.equal(buf.cpu(), theirs)

        buf = on_card(torch.zeros_like(mine))
        ops = [dist.P2POp(dist.isend, on_card(mine), peer), dist.P2POp(dist.irecv, buf, peer)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        assert torch.equal(buf.cpu(), theirs)
    dist.barrier()


def check_async_work_and_futures(rank, world):
    xs = [data(r) for r in range(world)]
    t = on_card(xs[rank])
    work = dist.all_reduce(t, async_op=True)
    assert work.wait() is True
    assert torch.equal(t.cpu(), xs[0] + xs[1])
    t2 = on_card(xs[rank])
    fut = dist.all_reduce(t2, op=dist.ReduceOp.AVG, async_op=True).get_future()
    value = fut.wait()
    assert isinstance(value, list) and value[0] is t2 and value[0].is_spyre
    torch.testing.assert_close(t2.cpu(), (xs[0] + xs[1]) / 2)
    t3 = on_card(xs[rank])
    w = dist.all_reduce(t3, op=dist.ReduceOp.AVG, async_op=True)
    while not w.is_completed():  # polled, never waited: a completed Work holds the average
        time.sleep(0.001)
    torch.testing.assert_close(t3.cpu(), (xs[0] + xs[1]) / 2)
    out = on_card(torch.zeros(world * 6, 5))
    w = dist.all_gather_into_tensor(out, on_card(xs[rank]), async_op=True)
    value = w.get_future().wait()
    assert value[0] is out, value
    assert w.is_completed()
    assert torch.equal(out.cpu(), torch.cat(xs))


def check_coalesced(rank, world):
    xs = [[data(r, shape=(4,), salt=s) for s in range(3)] for r in range(world)]
    ts = [on_card(x) for x in xs[rank]]
    with pytest.warns(FutureWarning):
        dist.all_reduce_coalesced(ts)
    assert all(torch.equal(t.cpu(), a + b) for t, a, b in zip(ts, *xs))

    ts = [on_card(x) for x in xs[rank]]
    with dist._coalescing_manager():
        for t in ts:
            dist.all_reduce(t)
    assert all(torch.equal(t.cpu(), a + b) for t, a, b in zip(ts, *xs))

    outs = [on_card(torch.zeros(world * 4)) for _ in range(3)]
    with dist._coalescing_manager():
        for o, x in zip(outs, xs[rank]):
            dist.all_gather_into_tensor(o, on_card(x))
    assert all(torch.equal(o.cpu(), torch.cat([xs[0][i], xs[1][i]])) for i, o in enumerate(outs))

    outs = [on_card(torch.zeros(2)) for _ in range(3)]
    with dist._coalescing_manager():
        for o, x in zip(outs, xs[rank]):
            dist.reduce_scatter_tensor(o, on_card(x))
    assert all(torch.equal(o.cpu(), (xs[0][i] + xs[1][i])[2 * rank:2 * rank + 2]) for i, o in enumerate(outs))


def check_dl16_f16_keeps_its_range(rank, world):
    """In DLFloat16 mode f16 device memory holds DLFloat16's bits: reductions add their values (in float32,
    rounded once to DLFloat16) and moves keep them, beyond binary16's 65504 too."""
    from spyre_triton import numerics
    with numerics.mode("dl16"):
        x = torch.tensor([40000.0 * (rank + 1), 0.1, 3e-9, -1.0])
        t = x.to(on_card(x).device, torch.float16)
        dist.all_reduce(t)
        want = numerics.round_dl16(numerics.round_dl16(torch.tensor([40000.0, 0.1, 3e-9, -1.0]))
                                   + numerics.round_dl16(torch.tensor([80000.0, 0.1, 3e-9, -1.0])))
        assert torch.equal(t.float().cpu(), want), (t.float().cpu(), want)  # 120000: inf in binary16
        t = x.to(on_card(x).device, torch.float16)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        assert t.float().cpu()[0].item() == 60032.0  # (40000 + 80000) / 2, rounded to DLFloat16
        out = on_card(torch.zeros(2, dtype=torch.float16))
        dist.reduce_scatter_tensor(out, x.to(out.device, torch.float16))
        assert torch.equal(out.float().cpu(), want[2 * rank:2 * rank + 2])
        outs = [on_card(torch.zeros(4, dtype=torch.float16)) for _ in range(world)]
        dist.all_gather(outs, x.to(outs[0].device, torch.float16))
        assert [o.float().cpu()[0].item() for o in outs] == [40000.0, 80000.0]


@pytest.mark.parametrize("check", [check_all_reduce_every_op_and_dtype, check_rooted_and_gathering_collectives,
                                   check_all_to_all_uneven, check_point_to_point_and_barrier,
                                   check_async_work_and_futures, check_coalesced,
                                   check_dl16_f16_keeps_its_range], ids=lambda f: f.__name__[6:])
def test_collective(check):
    spawn(check)


def check_spyre_and_cpu(rank, world):
    """"cpu:gloo,spyre:spyreccl": spyre tensors through spyreccl, CPU tensors through gloo."""
    assert str(dist.get_backend_config()) == "cpu:gloo,spyre:spyreccl"
    t = on_card(torch.full((3,), float(rank + 1)))
    dist.all_reduce(t)
    assert t.cpu().tolist() == [3.0] * 3
    c = torch.full((2,), float(rank + 1))
    dist.all_reduce(c)
    assert c.tolist() == [3.0, 3.0]


def check_spyre_only(rank, world):
    """"spyreccl" and the device default ("spyre:spyreccl", as "cuda:nccl" on CUDA): CPU tensors refused."""
    assert str(dist.get_backend_config()) == "spyre:spyreccl"
    t = on_card(torch.full((3,), float(rank + 1)))
    dist.all_reduce(t)
    assert t.cpu().tolist() == [3.0] * 3
    with pytest.raises(ValueError, match="got a CPU tensor; this process group serves spyre tensors only"):
        dist.all_reduce(torch.ones(2))


@pytest.mark.parametrize("backend, check", [("cpu:gloo,spyre:spyreccl", check_spyre_and_cpu),
                                            ("spyreccl", check_spyre_only), (None, check_spyre_only)])
def test_backend_strings(backend, check):
    """The three ways to ask for spyreccl: a device map, its name, and init_process_group()'s default."""
    spawn(check, backend=backend)


def test_registered_for_spyre():
    assert dist.Backend.SPYRECCL == "spyreccl"
    assert dist.get_default_backend_for_device("spyre") == "spyreccl"
    assert dist.is_backend_available("spyreccl")
