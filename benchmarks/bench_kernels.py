"""The Triton kernels that benchmarks/run.py times, with their inputs and the same op in torch.

A module of its own because @triton.jit needs the kernels' source in a real file, and because the
TRITON_INTERPRET=1 comparison imports it in a subprocess (the interpreter flag is read at import).

Each entry of KERNELS knows how to make its inputs (`make(size, device)`), launch the Triton
kernel (`run(args)`), compute the same result with torch into preallocated outputs (`torch_out`)
and into fresh ones (`torch_fresh`), and count its elements for per-element figures.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

# The tutorials' kernels are the package's reference kernels (the demo and the tests launch them too).
from spyre_triton.reference_kernels import add_kernel, layer_norm_fwd_kernel, matmul_kernel, softmax_kernel


# --- kernels of the benchmarks alone -------------------------------------------------------------
@triton.jit
def col_sum_kernel(x_ptr, out_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Sum over axis 0 of a row-major (M, N) matrix: the reduced axis is the strided one.
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for m in range(0, M, BLOCK_M):
        rows = m + tl.arange(0, BLOCK_M)
        x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :],
                    mask=(rows[:, None] < M) & (cols[None, :] < N), other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < N)


@triton.jit
def embedding_kernel(idx_ptr, w_ptr, out_ptr, T, D, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    # Embedding lookup: rows of the table at indices loaded from memory (a gather).
    toks = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    tmask = toks < T
    idx = tl.load(idx_ptr + toks, mask=tmask, other=0)
    for d in range(0, D, BLOCK_D):
        cols = d + tl.arange(0, BLOCK_D)
        m = tmask[:, None] & (cols[None, :] < D)
        rows = tl.load(w_ptr + idx[:, None] * D + cols[None, :], mask=m, other=0.0)
        tl.store(out_ptr + toks[:, None] * D + cols[None, :], rows, mask=m)


@triton.jit
def empty_kernel(x_ptr):
    pass


# --- the benchmark table ------------------------------------------------------------------------
def _gen():
    return torch.Generator().manual_seed(0)


class Bench:
    """One kernel of the table: inputs, the Triton launch, the torch equivalent."""
    name = ""
    desc = ""
    info = False              # shown for information, not judged against a target
    bound = "memory"          # "memory" or "compute": which target applies
    atol = 1e-5

    def __init__(self, size):
        self.size = size

    def elements(self) -> int:
        raise NotImplementedError

    def flops(self) -> int:
        return 0


class Add(Bench):
    name, desc = "add", "vector add fp32"

    def elements(self):
        return self.size

    def make(self, device):
        g = _gen()
        x, y = torch.rand(self.size, generator=g), torch.rand(self.size, generator=g)
        return {"x": x.to(device), "y": y.to(device), "out": torch.empty(self.size, device=device)}

    def run(self, a):
        n = a["x"].numel()
        add_kernel[(triton.cdiv(n, 4096),)](a["x"], a["y"], a["out"], n, BLOCK=4096)

    def torch_out(self, a):
        torch.add(a["x"], a["y"], out=a["out"])

    def torch_fresh(self, a):
        return a["x"] + a["y"]


class Softmax(Bench):
    name, desc = "softmax", "fused softmax fp32, rows"

    def elements(self):
        return self.size[0] * self.size[1]

    def make(self, device):
        x = torch.randn(self.size, generator=_gen())
        return {"x": x.to(device), "out": torch.empty(self.size, device=device)}

    def run(self, a):
        x, out = a["x"], a["out"]
        rows, cols = x.shape
        softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=triton.next_power_of_2(cols))

    def torch_out(self, a):
        torch.ops.aten._softmax.out(a["x"], 1, False, out=a["out"])

    def torch_fresh(self, a):
        return torch.softmax(a["x"], dim=1)


class LayerNorm(Bench):
    name, desc = "layernorm", "layer-norm forward fp32 (+mean, rstd)"

    def elements(self):
        return self.size[0] * self.size[1]

    def make(self, device):
        g = _gen()
        M, N = self.size
        x = torch.randn(M, N, generator=g)
        w, b = torch.rand(N, generator=g), torch.randn(N, generator=g)
        d = {"x": x, "w": w, "b": b, "out": torch.empty(M, N), "mean": torch.empty(M), "rstd": torch.empty(M)}
        return {k: v.to(device) for k, v in d.items()}

    def run(self, a):
        x = a["x"]
        M, N = x.shape
        layer_norm_fwd_kernel[(M,)](x, a["out"], a["w"], a["b"], a["mean"], a["rstd"], x.stride(0), N, 1e-5,
                                    BLOCK=min(triton.next_power_of_2(N), 65536 // x.element_size()))

    def torch_out(self, a):
        N = a["x"].shape[1]
        # aten's layer norm writes mean and rstd too, as the kernel does ((M, 1) shaped there).
        torch.ops.aten.native_layer_norm.out(a["x"], [N], a["w"], a["b"], 1e-5, out0=a["out"],
                                             out1=a["mean"].view(-1, 1), out2=a["rstd"].view(-1, 1))

    def torch_fresh(self, a):
        return torch.nn.functional.layer_norm(a["x"], a["x"].shape[1:], a["w"], a["b"], 1e-5)


class Matmul(Bench):
    name, desc, bound = "matmul_f32", "matmul fp32 (tl.dot)", "compute"
    dtype = torch.float32
    wrap = True
    info = False
    atol = 1e-3
    BM, BN, BK = 128, 128, 32  # the fastest of a sweep over 32..256 on spyre

    def elements(self):
        M, N, K = self.size
        return M * N * K

    def flops(self):
        return 2 * self.elements()

    def make(self, device):
        g = _gen()
        M, N, K = self.size
        a = torch.randn(M, K, generator=g).to(self.dtype)
        b = torch.randn(K, N, generator=g).to(self.dtype)
        return {"a": a.to(device), "b": b.to(device), "c": torch.empty(M, N, device=device)}

    def run(self, d):
        a, b, c = d["a"], d["b"], d["c"]
        M, K = a.shape
        N = b.shape[1]
        grid = (triton.cdiv(M, self.BM) * triton.cdiv(N, self.BN),)
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                            c.stride(1), BM=self.BM, BN=self.BN, BK=self.BK, GROUP_M=8, WRAP=self.wrap)

    def torch_out(self, d):
        torch.mm(d["a"], d["b"], out=d["c"])

    def torch_fresh(self, d):
        return torch.mm(d["a"], d["b"])


class MatmulF16(Matmul):
    name, desc = "matmul_f16", "matmul fp16 in, fp32 acc/out (tl.dot)"
    dtype = torch.float16
    atol = 1e-2

    def torch_out(self, d):
        # torch.mm in fp16 has no fast CPU path here (seconds at 1024^3) and cannot produce fp32;
        # torch's best way to this result is to upcast, then an fp32 GEMM (the upcasts are timed).
        torch.mm(d["a"].float(), d["b"].float(), out=d["c"])

    def torch_fresh(self, d):
        return torch.mm(d["a"].float(), d["b"].float())


class MatmulNoWrap(Matmul):
    name, desc = "matmul_f32_nowrap", "matmul fp32, tutorial kernel without `% M`, `% N` (info)"
    wrap = False
    info = True

    def make(self, device):
        M, N, K = self.size
        assert M % self.BM == 0 and N % self.BN == 0
        return super().make(device)


class ColSum(Bench):
    name, desc = "colsum", "sum over the strided axis (dim 0) fp32"
    atol = 1e-3   # sums of thousands of N(0, 1) values, added in another order than torch's

    def elements(self):
        return self.size[0] * self.size[1]

    def make(self, device):
        x = torch.randn(self.size, generator=_gen())
        return {"x": x.to(device), "out": torch.empty(self.size[1], device=device)}

    def run(self, a):
        x = a["x"]
        M, N = x.shape
        col_sum_kernel[(triton.cdiv(N, 256),)](x, a["out"], M, N, x.stride(0), BLOCK_M=64, BLOCK_N=256)

    def torch_out(self, a):
        torch.sum(a["x"], 0, out=a["out"])

    def torch_fresh(self, a):
        return a["x"].sum(0)


class Embedding(Bench):
    name, desc = "embedding", "embedding lookup (gather) fp32"

    # size = (tokens, vocab, dim)
    def elements(self):
        return self.size[0] * self.size[2]

    def make(self, device):
        g = _gen()
        T, V, D = self.size
        w = torch.randn(V, D, generator=g)
        idx = torch.randint(0, V, (T,), generator=g)
        return {"idx": idx.to(device), "w": w.to(device), "out": torch.empty(T, D, device=device)}

    def run(self, a):
        T, D = a["out"].shape
        embedding_kernel[(triton.cdiv(T, 16),)](a["idx"], a["w"], a["out"], T, D, BLOCK_T=16, BLOCK_D=512)

    def torch_out(self, a):
        torch.index_select(a["w"], 0, a["idx"], out=a["out"])

    def torch_fresh(self, a):
        return torch.nn.functional.embedding(a["idx"], a["w"])


KERNELS = {k.name: k for k in (Add, Softmax, LayerNorm, Matmul, MatmulF16, MatmulNoWrap, ColSum, Embedding)}

# Sizes: the (full) and smaller ones for --quick. run.py has the TRITON_INTERPRET=1 sizes.
_MM = "matmul_f32", "matmul_f16", "matmul_f32_nowrap"
SIZES = {
    "full": {"add": 1 << 24, "softmax": (4096, 1024), "layernorm": (4096, 1024), "colsum": (4096, 1024),
             "embedding": (16384, 32768, 512), **{k: (1024, 1024, 1024) for k in _MM}},
    "quick": {"add": 1 << 22, "softmax": (1024, 1024), "layernorm": (1024, 1024), "colsum": (1024, 1024),
              "embedding": (4096, 32768, 512), **{k: (512, 512, 512) for k in _MM}},
}


def outputs(a):
    """The tensors a kernel writes, for checking results."""
    return [a[k] for k in ("out", "c") if k in a]
