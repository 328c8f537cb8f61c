"""The kernel launcher Triton calls (backend/driver.py make_launcher): its C fast path and every case it
hands to the Python launcher (hooks, trackers, grids that are not plain ints, empty grids, errors)."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton import knobs

import spyre_triton
from spyre_triton import _runtime

from conftest import DEVICE


@triton.jit
def scale_kernel(x_ptr, SCALE: tl.constexpr, out_ptr, n, BLOCK: tl.constexpr):
    # a constexpr between pointer arguments: the launcher must pick the kernel's arguments out by index
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE, mask=mask)


def run_scale(n=1000, grid=None):
    x = torch.arange(n, dtype=torch.float32)
    out = torch.zeros(n, device=DEVICE)
    ck = scale_kernel[grid or (triton.cdiv(n, 128),)](x.to(DEVICE), 3, out, n, BLOCK=128)
    return ck, x, out


def test_the_c_launcher_runs_plain_kernels_with_constexprs_between_arguments():
    ck, x, out = run_scale()
    assert type(ck.run) is _runtime.Launcher
    assert torch.equal(out.cpu(), x * 3)
    assert ck.run.name == "scale_kernel"  # attributes it lacks are the Python launcher's


def test_pointer_alignment_picks_the_specialisation():
    """A 16-byte-aligned pointer compiles a kernel that may assume it (tt.divisibility = 16), a pointer
    one element in does not: two cache entries, and both compute the right values."""
    n = 256
    base = torch.arange(n + 1, dtype=torch.float32, device=DEVICE)
    out = torch.zeros(n + 1, device=DEVICE)
    aligned = scale_kernel[(2,)](base, 3, out, n, BLOCK=128)
    assert torch.equal(out.cpu()[:n], base.cpu()[:n] * 3)
    shifted = scale_kernel[(2,)](base[1:], 3, out[1:], n, BLOCK=128)
    assert aligned is not shifted
    header = lambda ck: next(line for line in ck.asm["ttir"].splitlines() if "tt.func" in line)
    assert header(aligned).count("tt.divisibility = 16") == 3      # x_ptr, out_ptr and n = 256
    assert header(shifted).count("tt.divisibility = 16") == 1      # n only
    assert torch.equal(out.cpu()[1:], base.cpu()[1:] * 3)


def test_enter_and_exit_hooks_run_through_the_python_launcher():
    seen = []
    enter = lambda md: seen.append(("enter", md.get()["name"]))
    leave = lambda md: seen.append(("exit", md.get()["name"]))
    knobs.runtime.launch_enter_hook.add(enter)
    knobs.runtime.launch_exit_hook.add(leave)
    try:
        _, x, out = run_scale()
    finally:
        knobs.runtime.launch_enter_hook.remove(enter)
        knobs.runtime.launch_exit_hook.remove(leave)
    assert seen == [("enter", "scale_kernel"), ("exit", "scale_kernel")]
    assert torch.equal(out.cpu(), x * 3)


def test_tracked_launches_are_recorded():
    with spyre_triton.track() as t:
        _, x, out = run_scale()
    assert t.kernels["scale_kernel"] == 1
    assert torch.equal(out.cpu(), x * 3)


def test_numpy_grid_and_empty_grid():
    _, x, out = run_scale(grid=(np.int64(8),))
    assert torch.equal(out.cpu(), x * 3)
    ck, _, out = run_scale(grid=(0,))  # nothing runs, nothing fails
    assert torch.equal(out.cpu(), torch.zeros(1000))
    before = ck.function.stats()["launches"]
    ck.run(0, 1, 1, 0, ck.function, None, None, None, None, out, 3, out, 1000)
    assert ck.function.stats()["launches"] == before


def test_a_grid_too_large_is_a_clear_error():
    ck, _, out = run_scale()
    with pytest.raises(ValueError, match="bad grid"):
        ck.run(1 << 40, 1, 1, 0, ck.function, None, None, None, None, out, 3, out, 1000)


def test_errors_name_the_kernel_and_the_argument():
    ck, _, out = run_scale()
    cpu = torch.zeros(1000)
    with pytest.raises(ValueError, match="out_ptr.*scale_kernel.*cpu"):
        ck.run(8, 1, 1, 0, ck.function, None, None, None, None, out, 3, cpu, 1000)
    with pytest.raises(TypeError, match="'x_ptr' must be a tensor"):
        ck.run(8, 1, 1, 0, ck.function, None, None, None, None, object(), 3, out, 1000)
    with pytest.raises(TypeError, match="'n' must be an integer, not float"):
        ck.run(8, 1, 1, 0, ck.function, None, None, None, None, out, 3, out, 1000.0)


def test_launcher_construction_checks_its_arguments():
    with pytest.raises(ValueError, match="arg_index"):
        _runtime.Launcher(print, (0, -1), int, [], [])
    with pytest.raises(TypeError, match="callable"):
        _runtime.Launcher(None, None, int, [], [])
    with pytest.raises(TypeError):
        _runtime.Launcher(print, None, int, (), [])  # trackers must be the live list, not a copy


def test_exit_hook_alone_still_gets_launch_metadata():
    # with no hooks a launch skips building its metadata (backend/driver.py); an exit hook still reads it
    from triton import knobs
    seen = []
    leave = lambda md: seen.append(md.get()["name"])
    knobs.runtime.launch_exit_hook.add(leave)
    try:
        _, x, out = run_scale()
    finally:
        knobs.runtime.launch_exit_hook.remove(leave)
    assert seen == ["scale_kernel"]
    assert torch.equal(out.cpu(), x * 3)


def test_idle_hooks_build_no_launch_metadata():
    from triton import knobs
    assert not knobs.runtime.launch_enter_hook.calls and not knobs.runtime.launch_exit_hook.calls
    ck, x, out = run_scale()
    assert ck.launch_metadata((8, 1, 1), 0, x, 3, out, 1000) is None
    enter = lambda md: None
    knobs.runtime.launch_enter_hook.add(enter)
    try:
        assert ck.launch_metadata((8, 1, 1), 0, x, 3, out, 1000).get()["name"] == "scale_kernel"
    finally:
        knobs.runtime.launch_enter_hook.remove(enter)
