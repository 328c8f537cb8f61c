"""Modelled card-to-card transfers: collectives, peer-to-peer sends and copies between two cards of one
process (`t.to("spyre:1")`) on the drawer's links.

A ring over n cards moves each byte over (n - 1) links in (n - 1) steps per phase (the bandwidth-optimal
schedule NCCL and gloo use for large messages); every step pays the link's latency. With the drawer's
switch each card's link carries only its own ring traffic, so a step takes bytes / n / link_bw.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from .hardware import HardwareConfig, get_hardware

listeners: list = []  # active profiles (shared with capture.listeners' users through profile())


@dataclass(frozen=True)
class CommRecord:
    """One transfer: a collective over `world` cards, or a send/recv between two."""
    name: str          # all_reduce, all_gather_single, send, ...
    nbytes: int        # the bytes the collective is about (the buffer of all_reduce, the output of a gather)
    world: int
    modeled_ns: float
    wall_ns: int
    hw: HardwareConfig


def link_bound_ns(hw: HardwareConfig, name: str, nbytes: int, world: int) -> float:
    """Bytes each card must put on its link for the collective, over the link's bandwidth (no latency)."""
    n = max(world, 1)
    share = (n - 1) / n
    factor = {"all_reduce": 2 * share, "all_reduce_coalesced": 2 * share, "barrier": 0.0,
              "broadcast": 1.0, "reduce": 1.0, "send": 1.0, "recv": 1.0, "peer_copy": 1.0}.get(name, share)
    return factor * nbytes / hw.link_bw * 1e9


def steps(name: str, world: int) -> int:
    """Latency-bound steps of the ring schedule."""
    n = max(world, 1)
    if name in ("send", "recv", "peer_copy"):
        return 1
    if name in ("all_reduce", "all_reduce_coalesced", "barrier"):
        return 2 * (n - 1)
    return n - 1


def modeled_ns(name: str, nbytes: int, world: int, hw: HardwareConfig | None = None) -> float:
    hw = hw or get_hardware()
    return link_bound_ns(hw, name, nbytes, world) + steps(name, world) * hw.link_latency_ns


def record(name: str, nbytes: int, world: int, wall_ns: int) -> None:
    """A transfer finished on this rank: model it for every active profile."""
    hw = get_hardware()
    rec = CommRecord(name, int(nbytes), int(world), modeled_ns(name, nbytes, world, hw), int(wall_ns), hw)
    for l in list(listeners):
        l._add_comm(rec)


# --- copies between cards of one process --------------------------------------------------------------
# While a profile is active, aten::_copy_from on spyre is this Python kernel (registered over the device
# extension's, which comes back when the last profile ends): it copies with the C++ one and reports a
# copy from one card to another as a peer-to-peer transfer.
_copy_lib = None


def _copy_from(src, dst, non_blocking=False):
    from ..device import _C
    peer = src.is_spyre and dst.is_spyre and src.device != dst.device
    start = time.perf_counter_ns() if peer else 0
    _C.copy_from(src, dst)  # the device's own copy (it converts f16 in DLFloat16 mode)
    if peer:
        record("peer_copy", src.numel() * src.element_size(), 2, time.perf_counter_ns() - start)
    return dst


def watch_peer_copies(on: bool) -> None:
    """Called by profile() as it starts (True) and ends (False): install or remove the copy kernel."""
    global _copy_lib
    if on and _copy_lib is None:
        import warnings
        import torch
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
            _copy_lib = torch.library.Library("aten", "IMPL")
            _copy_lib.impl("_copy_from", _copy_from, "PrivateUse1")
    elif not on and _copy_lib is not None and not listeners:
        _copy_lib._destroy()
        _copy_lib = None
