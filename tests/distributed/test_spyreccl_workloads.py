"""Programs written for several cards, on 2 ranks: functional collectives inside torch.compile, DDP
training, FSDP2 training and DTensor tensor parallelism, each against a single-process run on the CPU."""
import copy

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from spyreccl_harness import spawn


def card(rank):
    return torch.device("spyre", rank)


def check_functional_collectives_compiled(rank, world):
    import torch.distributed._functional_collectives as funcol
    group = dist.group.WORLD

    def f(x, y):
        s = funcol.all_reduce(x * 2, "sum", group)
        g = funcol.all_gather_tensor(y + 1, 0, group)
        r = funcol.reduce_scatter_tensor(g * 3, "sum", 0, group)
        a = funcol.all_to_all_single(s, None, None, group)
        return s.relu(), g, r, a

    xs = [torch.randn(4, 3, generator=torch.Generator().manual_seed(r)) for r in range(world)]
    ys = [torch.randn(2, 3, generator=torch.Generator().manual_seed(10 + r)) for r in range(world)]
    s, g, r, a = torch.compile(f)(xs[rank].to(card(rank)), ys[rank].to(card(rank)))
    s_ref = 2 * xs[0] + 2 * xs[1]
    g_ref = torch.cat([y + 1 for y in ys])
    torch.testing.assert_close(s.cpu(), s_ref.relu())
    torch.testing.assert_close(g.cpu(), g_ref)
    torch.testing.assert_close(r.cpu(), (g_ref * 3 * world).chunk(world)[rank])
    torch.testing.assert_close(a.cpu(), s_ref.chunk(world)[rank].repeat(world, 1))
    assert s.device == card(rank)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def batches(steps=3, n=8):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(n, 8, generator=g), torch.randn(n, 4, generator=g)) for _ in range(steps)]


def train_reference(model, data, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for x, y in data:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model


def check_ddp_matches_single_process(rank, world):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    ref = MLP()
    model = copy.deepcopy(ref).to(card(rank))
    ddp = DDP(model)
    data = batches()
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for x, y in data:  # each rank trains on its half of the batch
        opt.zero_grad()
        half = x.shape[0] // world
        xs, ys = x[rank * half:(rank + 1) * half], y[rank * half:(rank + 1) * half]
        nn.functional.mse_loss(ddp(xs.to(card(rank))), ys.to(card(rank))).backward()
        opt.step()
    train_reference(ref, data)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)


def check_fsdp2_matches_single_process(rank, world):
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.device_mesh import init_device_mesh
    torch.manual_seed(0)
    ref = MLP()
    model = copy.deepcopy(ref).to(card(rank))
    mesh = init_device_mesh("spyre", (world,))
    fully_shard(model.fc1, mesh=mesh)
    fully_shard(model, mesh=mesh)
    data = batches()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in data:
        opt.zero_grad()
        half = x.shape[0] // world
        xs, ys = x[rank * half:(rank + 1) * half], y[rank * half:(rank + 1) * half]
        nn.functional.mse_loss(model(xs.to(card(rank))), ys.to(card(rank))).backward()
        opt.step()
    train_reference(ref, data)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        torch.testing.assert_close(full.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("check", [check_functional_collectives_compiled, check_ddp_matches_single_process,
                                   check_fsdp2_matches_single_process], ids=lambda f: f.__name__[6:])
def test_workload(check):
    spawn(check, timeout_s=120)
