"""Matmul tiles for skinny problems (M <= 16 rows: a decode step's matrix-vector products).

The general heuristic (inductor.py, `_default_gemm_config`) pads M to at least 16 rows and steps K by 64.
For one live row that multiplied the work of the PE array by 16 and the launches' K steps by 8. Here
the tile has as many rows as the problem (rounded up to a power of two, from 1), so the runtime's dot
takes its skinny path (runtime/dot.c, `gemm_skinny`: B read once, no packing) whenever M <= 4, and K is
stepped by up to 512: a weight's columns stream through in few long steps. BLOCK_N stays at 64 so that
a 512-wide layer still gives 8 programs to share among cores.

Measured (fp32, 1 host thread, x @ W.t() with W 1376 x 512, torch.compile on spyre): M = 1 took 1.47 ms
with the general tile (16 x 128 x 64) and the packed dot; 0.78 ms with one row; 0.49 ms with the skinny
dot and 64 x 512 steps. torch.mm on the host: 0.12 ms.
"""
from __future__ import annotations

SKINNY_N = 64
SKINNY_K = 512


def skinny_gemm_config(m, n, k, hint, GemmConfig):
    """One tile for an M <= 16 problem; `hint(x, lo, hi)` is the size's hint rounded up to a power of
    two and clamped (inductor.py's)."""
    return GemmConfig(hint(m, 1, 16), hint(n, 16, SKINNY_N), hint(k, 16, SKINNY_K), 1, 4)
