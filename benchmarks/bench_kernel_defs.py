"""Kernels timed by bench_kernels.py, importable by its TRITON_INTERPRET=1 subprocess too."""
import triton, triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=mask)

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK
        b_ptrs += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)

def run(name, x, y, out, size):
    if name == "add":
        n = x.numel()
        add_kernel[(triton.cdiv(n, 4096),)](x, y, out, n, BLOCK=4096)
    elif name == "softmax":
        rows, cols = x.shape
        softmax_kernel[(rows,)](out, x, x.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    else:
        M, K = x.shape
        N = y.shape[1]
        matmul_kernel[(M // 64, N // 64)](x, y, out, M, N, K, BM=64, BN=64, BK=32)

def inputs(name, size, device):
    import torch
    g = torch.Generator().manual_seed(0)
    if name == "add":
        x, y = torch.rand(size, generator=g), torch.rand(size, generator=g)
        out = torch.empty(size)
    elif name == "softmax":
        x = torch.randn(size, generator=g); y = None; out = torch.empty(size)
    else:
        x = torch.randn(size[0], size[1], generator=g); y = torch.randn(size[1], size[2], generator=g)
        out = torch.empty(size[0], size[2])
    mv = lambda t: None if t is None else t.to(device)
    return mv(x), mv(y), mv(out)
