"""Modelled card-to-card transfers: collectives and peer-to-peer sends on the drawer's links.

A ring over n cards moves each byte over (n - 1) links in (n - 1) steps per phase (the bandwidth-optimal
schedule NCCL and gloo use for large messages); every step pays the link's latency. With the drawer's
switch each card's link carries only its own ring traffic, so a step takes bytes / n / link_bw.
"""
from __future__ import annotations

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
              "broadcast": 1.0, "reduce": 1.0, "send": 1.0, "recv": 1.0}.get(name, share)
    return factor * nbytes / hw.link_bw * 1e9


def steps(name: str, world: int) -> int:
    """Latency-bound steps of the ring schedule."""
    n = max(world, 1)
    if name in ("send", "recv"):
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
