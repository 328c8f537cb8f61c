"""The card-to-card link in the performance model: collectives get modelled times in spyre_triton.profile(),
its table and its Chrome trace."""
import pytest
import torch
import torch.distributed as dist

import spyre_triton
from spyre_triton.perf import comm
from spyre_triton.perf.hardware import HardwareConfig, from_string

from spyreccl_harness import spawn


def test_ring_model():
    hw = HardwareConfig(link_bw=50e9, link_latency_ns=2000.0)
    mb = 1 << 20
    # all_reduce: 2 (n-1)/n of the buffer over each link, 2 (n-1) latency steps
    assert comm.modeled_ns("all_reduce", mb, 2, hw) == pytest.approx(mb / 50e9 * 1e9 + 2 * 2000.0)
    assert comm.modeled_ns("all_reduce", mb, 4, hw) == pytest.approx(1.5 * mb / 50e9 * 1e9 + 6 * 2000.0)
    # gathers and scatters: (n-1)/n of the whole buffer, n-1 steps; a send: the bytes and one step
    assert comm.modeled_ns("all_gather_single", mb, 4, hw) == pytest.approx(0.75 * mb / 50e9 * 1e9 + 3 * 2000.0)
    assert comm.modeled_ns("send", mb, 2, hw) == pytest.approx(mb / 50e9 * 1e9 + 2000.0)
    assert from_string("link_bw=25e9,link_topology=switch").link_bw == 25e9
    with pytest.raises(ValueError, match="only 'switch' is modelled"):
        from_string("link_topology=ring")


def check_profiled_collectives(rank, world):
    t = torch.ones(1 << 18, device=f"spyre:{rank}")  # 1 MiB
    out = torch.zeros(2 << 18, device=f"spyre:{rank}")
    with spyre_triton.profile() as prof:
        dist.all_reduce(t)
        dist.all_gather_into_tensor(out, t, async_op=True).wait()
    names = [c.name for c in prof.comms]
    assert names == ["all_reduce", "all_gather_single"], names
    ar, ag = prof.comms
    hw = spyre_triton.get_hardware()
    assert ar.nbytes == 1 << 20 and ag.nbytes == 2 << 20 and ar.world == 2
    assert ar.modeled_ns == pytest.approx((1 << 20) / hw.link_bw * 1e9 + 2 * hw.link_latency_ns)
    assert prof.comm_ns == pytest.approx(ar.modeled_ns + ag.modeled_ns)
    table = prof.table()
    assert "transfer (card to card)" in table and "all_reduce" in table and "2 transfers" in table
    trace = prof.chrome_trace()["traceEvents"]
    assert any(e.get("args", {}).get("name") == "Card links (modelled)" for e in trace)
    slices = [e for e in trace if e.get("cat") == "transfer"]
    assert [e["name"] for e in slices] == names and slices[1]["ts"] == pytest.approx(slices[0]["dur"])


def test_collectives_in_profile():
    spawn(check_profiled_collectives)


def test_copy_between_cards_is_a_peer_transfer():
    x = torch.arange(1 << 16, dtype=torch.float32).to("spyre:0")
    with spyre_triton.profile() as prof:
        y = x.to("spyre:1")
        z = y.cpu()
        w = torch.empty(1 << 16, device="spyre:1")
        w.copy_(x)
    assert y.device == torch.device("spyre", 1) and torch.equal(z, torch.arange(1 << 16, dtype=torch.float32))
    assert torch.equal(w.cpu(), z)
    hw = spyre_triton.get_hardware()
    assert [(c.name, c.nbytes) for c in prof.comms] == [("peer_copy", 1 << 18)] * 2  # not the copy to the host
    assert prof.comms[0].modeled_ns == pytest.approx((1 << 18) / hw.link_bw * 1e9 + hw.link_latency_ns)
    assert "peer_copy" in prof.table()
    before = prof.comms[:]
    x.to("spyre:2")  # outside the profile: the device extension's own copy again, nothing recorded
    assert prof.comms == before
