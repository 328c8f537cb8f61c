"""The kernels of Triton's tutorials 01-05 run on spyre and match PyTorch on the CPU.

01, 03 and 05's forward kernel are the package's reference kernels (spyre_triton/reference_kernels.py,
which the demo and the benchmarks launch too); 02's persistent form (tl.range with num_stages), 04
and 05's backward kernels are written here.

(The tutorials' own files are run unchanged by `tools/run_upstream_tutorials.py`, which needs the
fetched Triton sources; these tests keep the same kernels under CI.)
"""
import pytest
import torch
import triton
import triton.language as tl

from asm_helpers import mnemonics
from conftest import DEVICE
from spyre_triton import reference_kernels
from spyre_triton.reference_kernels import add_kernel, layer_norm_fwd_kernel


# -- 01 vector add -------------------------------------------------------------------------------
def vector_add(x, y):
    out = torch.empty_like(x)
    n = out.numel()
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=1024)
    return out


def test_device_is_spyre():
    assert DEVICE == torch.device("spyre", 0)
    assert triton.runtime.driver.active.get_current_target().backend == "spyre"


@pytest.mark.parametrize("n", [1, 98432, 4096])
def test_vector_add(n):
    torch.manual_seed(0)
    x, y = torch.rand(n), torch.rand(n)
    out = vector_add(x.to(DEVICE), y.to(DEVICE))
    assert out.device.type == "spyre"
    torch.testing.assert_close(out.cpu(), x + y, rtol=0, atol=0)


def test_compiled_kernel_has_readable_assembly():
    x = torch.rand(256, device=DEVICE)
    k = add_kernel.warmup(x, x, x, 256, BLOCK=256, grid=(1,))
    asm = k.asm["spyreasm"]
    assert {"ld.f32", "st.f32", "add.f32"} <= set(mnemonics(k))
    assert "tl.load(x_ptr + offs, mask=mask)" in asm  # Python source lines as comments
    assert isinstance(k.asm["spyrebin"], bytes)


# -- 02 fused softmax ---------------------------------------------------------------------------
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols, BLOCK: tl.constexpr,
                   num_stages: tl.constexpr):
    first = tl.program_id(0)
    step = tl.num_programs(0)
    for row in tl.range(first, n_rows, step, num_stages=num_stages):
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        den = tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    BLOCK = triton.next_power_of_2(n_cols)
    y = torch.empty_like(x)
    props = triton.runtime.driver.active.utils.get_device_properties(DEVICE.index)
    kernel = softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK=BLOCK, num_stages=2,
                                   num_warps=8, grid=(1,))
    kernel._init_handles()
    occupancy = props["max_num_regs"] // (kernel.n_regs * props["warpSize"] * 8)
    occupancy = min(occupancy, props["max_shared_mem"] // kernel.metadata.shared)
    programs = min(props["multiprocessor_count"] * occupancy, n_rows)
    kernel[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK, 2)
    return y


@pytest.mark.parametrize("shape", [(1823, 781), (4, 1024), (33, 7)])
def test_softmax(shape):
    torch.manual_seed(0)
    x = torch.randn(*shape)
    y = softmax(x.to(DEVICE))
    torch.testing.assert_close(y.cpu(), torch.softmax(x, dim=1))


# -- 03 matmul with leaky ReLU, autotuned ---------------------------------------------------------
def matmul_configs():
    return [
        triton.Config({"BM": 64, "BN": 64, "BK": 32, "GROUP_M": 8}, num_stages=2, num_warps=4),
        triton.Config({"BM": 128, "BN": 64, "BK": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 4}, num_stages=4, num_warps=4),
    ]


# the tutorial's autotuned launch of the reference kernel (its % M / % N wrap on: WRAP=True)
matmul_kernel = triton.autotune(configs=matmul_configs(), key=["M", "N", "K"])(reference_kernels.matmul_kernel)


def matmul(a, b, activation=""):
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), WRAP=True, ACTIVATION=activation)
    return c


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_matmul(activation):
    torch.manual_seed(0)
    a, b = torch.randn(200, 96, dtype=torch.float16), torch.randn(96, 136, dtype=torch.float16)
    c = matmul(a.to(DEVICE), b.to(DEVICE), activation)
    ref = a.float() @ b.float()
    if activation:
        ref = torch.nn.functional.leaky_relu(ref, 0.01)
    torch.testing.assert_close(c.cpu(), ref.half(), rtol=1e-2, atol=1e-2)
    assert matmul_kernel.best_config is not None


# -- 04 low-memory dropout ------------------------------------------------------------------------
@triton.jit
def seeded_dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


def seeded_dropout(x, p, seed):
    out = torch.empty_like(x)
    n = x.numel()
    seeded_dropout_kernel[(triton.cdiv(n, 1024),)](x, out, n, p, seed, BLOCK=1024)
    return out


def test_dropout_matches_triton_interpreter_stream():
    x = torch.randn(3000)
    a = seeded_dropout(x.to(DEVICE), 0.5, 123).cpu()
    b = seeded_dropout(x.to(DEVICE), 0.5, 123).cpu()
    c = seeded_dropout(x.to(DEVICE), 0.5, 512).cpu()
    torch.testing.assert_close(a, b, rtol=0, atol=0)  # same seed, same mask
    assert not torch.equal(a, c)
    kept = a != 0
    assert 0.4 < kept.float().mean().item() < 0.6
    torch.testing.assert_close(a[kept], x[kept] * 2)
    # the exact Philox stream Triton's own interpreter produces for the same seed and offsets
    ref = _philox_uniform_reference(123, torch.arange(3000, dtype=torch.int32))
    torch.testing.assert_close(kept, ref > 0.5)


def _philox_uniform_reference(seed, offsets):
    """tl.rand on the CPU through Triton's interpreter, the oracle for the random stream."""
    import os
    import subprocess
    import sys
    code = (
        "import torch, triton, triton.language as tl\n"
        "@triton.jit\n"
        "def k(o, s, N: tl.constexpr):\n"
        "    i = tl.arange(0, N)\n"
        "    tl.store(o + i, tl.rand(s, i))\n"
        "o = torch.empty(4096)\n"
        f"k[(1,)](o, {seed}, N=4096)\n"
        "import sys; sys.stdout.write(','.join(repr(float(v)) for v in o[:3000]))\n")
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return torch.tensor([float(v) for v in out.split(",")])


# -- 05 layer norm, forward and backward with a lock ---------------------------------------------
@triton.jit
def ln_bwd_dx_kernel(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N, GROUP_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_M
    Lock += lock_id
    Count = Lock + GROUP_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.)
    wdy = tl.where(mask, w * dy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    tl.store(DX + cols, (wdy - (xhat * c1 + c2)) * rstd, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = dy.to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@triton.jit
def ln_bwd_dwdb_kernel(DW, DB, FINAL_DW, FINAL_DB, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_M):
        rows = i + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.)
        db += tl.load(DB + offs, mask=mask, other=0.)
    tl.store(FINAL_DW + cols, tl.sum(dw, axis=0), mask=cols < N)
    tl.store(FINAL_DB + cols, tl.sum(db, axis=0), mask=cols < N)


def test_layer_norm_forward_and_backward():
    torch.manual_seed(0)
    M, N, eps = 151, 300, 1e-5
    x = torch.randn(M, N)
    w, b = torch.rand(N), torch.rand(N)
    dy = 0.1 * torch.randn(M, N)
    dev = lambda t: t.to(DEVICE)
    X, W, B, DY = dev(x), dev(w), dev(b), dev(dy)
    Y = torch.empty_like(X)
    mean = torch.empty(M, device=DEVICE)
    rstd = torch.empty(M, device=DEVICE)
    layer_norm_fwd_kernel[(M,)](X, Y, W, B, mean, rstd, X.stride(0), N, eps, BLOCK=128)
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    ref = torch.nn.functional.layer_norm(xr, (N,), wr, br, eps)
    torch.testing.assert_close(Y.cpu(), ref, rtol=1e-4, atol=1e-4)
    ref.backward(dy)

    GROUP_M = 16
    locks = torch.zeros(2 * GROUP_M, dtype=torch.int32, device=DEVICE)
    _dw = torch.zeros((GROUP_M, N), device=DEVICE)
    _db = torch.zeros((GROUP_M, N), device=DEVICE)
    dw, db = torch.empty(N, device=DEVICE), torch.empty(N, device=DEVICE)
    dx = torch.empty_like(X)
    ln_bwd_dx_kernel[(M,)](dx, DY, _dw, _db, X, W, mean, rstd, locks, X.stride(0), N, GROUP_M=GROUP_M,
                           BLOCK_N=512)
    ln_bwd_dwdb_kernel[(triton.cdiv(N, 128),)](_dw, _db, dw, db, GROUP_M, N, BLOCK_M=32, BLOCK_N=128)
    torch.testing.assert_close(dx.cpu(), xr.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dw.cpu(), wr.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(db.cpu(), br.grad, rtol=1e-4, atol=1e-4)
