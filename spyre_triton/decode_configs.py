"""Matmul tiles for skinny problems (M <= 16 rows: a decode step's matrix-vector products).

The general heuristic (inductor.py, `_default_gemm_config`) pads M to at least 16 rows and steps K by 64.
For one live row that multiplied the work of the PE array by 16 and the launches' K steps by 8. Here
the tile has as many rows as the problem (rounded up to a power of two, from 1), so the runtime's dot
takes its skinny path (runtime/dot.c, `gemm_skinny`: B read once, no packing) whenever M <= 4, and K is
stepped by up to 512 (`skinny_block_k`: a shorter step where 512 would pad the last one by more than a
sixteenth): a weight's columns stream through in few long steps. BLOCK_N is 64 unless a narrower tile
shares the columns more evenly among the cores (`skinny_block_n`: Granite-8B's MLP, N = 12800, takes 16 at
one row).

Measured (fp32, 1 host thread, x @ W.t() with W 1376 x 512, torch.compile on spyre): M = 1 took 1.47 ms
with the general tile (16 x 128 x 64) and the packed dot; 0.78 ms with one row; 0.49 ms with the skinny
dot and 64 x 512 steps. torch.mm on the host: 0.12 ms.
"""
from __future__ import annotations

from spyre_triton.config import NUM_CORES

SKINNY_N = 64
NARROW_N = (64, 32, 16)  # BLOCK_N candidates, preferred in this order
SKINNY_K = 512
MIN_K = 128  # shorter steps cost more in per-step instructions than their padding saves
K_WASTE = 16  # a K step may read at most K / K_WASTE padding


def skinny_block_k(k: int) -> int:
    """The K step for a reduction of k: the largest power of two in [MIN_K, SKINNY_K] whose padding (the
    last, ragged step) is at most k / K_WASTE, else the one with the least padding (then the longest); k
    up to MIN_K takes one step, k rounded up to a power of two (at least 16). A ragged step is a masked
    load that fills its tile with zeros and a dot over them; with K = 1376 (the decode benchmark's
    Llama MLP) a 512 step padded 160 of every 1536 and its fill cost more than the dot (runtime perf
    profile), 128 pads 32."""
    k = max(int(k), 1)
    if k <= MIN_K:
        return max(16, 1 << (k - 1).bit_length())
    steps = [SKINNY_K >> i for i in range(SKINNY_K.bit_length()) if SKINNY_K >> i >= MIN_K]
    pad = {bk: -k % bk for bk in steps}
    for bk in steps:
        if pad[bk] * K_WASTE <= k:
            return bk
    return min(steps, key=lambda bk: (pad[bk], -bk))


def skinny_block_n(n: int, m: int = 1, cores: int = NUM_CORES) -> int:
    """BLOCK_N for a weight of n columns times m rows: the candidate whose busiest core moves the fewest bytes.
    A matrix-vector product is bound by device memory, which the performance model shares equally among
    the busy cores (docs/perf-model.md); with more programs than cores the busiest core runs
    ceil(programs / cores) of them, each reading its BLOCK_N columns of the weight and the m rows of the
    activations (BLOCK_M, a power of two). Granite-8B's gate and up projections (N = 12800) at one row give
    200 programs of 64 columns, 7 on some cores against 6.25 on average: 12% over the memory time; 16
    columns give 800, 25 on every core. At 4 rows a 16-column program re-reads 4 rows for every 16 columns,
    and 32 costs less. Up to `cores` programs all run at once, so 64 stays (the widest, fewest steps)
    wherever its programs fit the cores or divide evenly among them."""
    n, rows = max(int(n), 1), 1 << (max(int(m), 1) - 1).bit_length()
    if n <= SKINNY_N * cores:  # one round of programs: n rounded up to a power of two, in [16, 64]
        return max(16, min(SKINNY_N, 1 << (n - 1).bit_length()))

    def busiest(bn):
        programs = -(-n // bn)
        busy = min(cores, programs)
        return -(-programs // busy) * busy * (bn + rows)  # the busiest core's share x the cores sharing memory
    return min(NARROW_N, key=lambda bn: (busiest(bn), -bn))


def skinny_gemm_config(m, n, k, hint, GemmConfig, size=None):
    """One tile for an M <= 16 problem; `hint(x, lo, hi)` is the size's hint rounded up to a power of
    two and clamped (inductor.py's), `size(x)` the hint itself (K's and N's tiles are chosen from it)."""
    bk = skinny_block_k(size(k)) if size is not None else hint(k, 16, SKINNY_K)
    bn = skinny_block_n(size(n), size(m)) if size is not None else hint(n, 16, SKINNY_N)
    return GemmConfig(hint(m, 1, 16), bn, bk, 1, 4)
