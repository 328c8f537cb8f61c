"""K steps of the skinny matmul tiles (spyre_triton/decode_configs.py): at most a sixteenth of padding
where a power of two in [128, 512] allows it, one step for short reductions, and the result of a
compiled M = 1 matmul whose K step is ragged equals torch's within fp32 accumulation."""
import pytest
import torch

from spyre_triton.config import NUM_CORES
from spyre_triton.decode_configs import K_WASTE, MIN_K, NARROW_N, SKINNY_K, SKINNY_N, skinny_block_k, skinny_block_n


@pytest.mark.parametrize("k", [1, 16, 20, 100, 128, 200, 384, 512, 600, 768, 1376, 3072, 4096, 11008, 12800])
def test_block_k_is_a_power_of_two_with_little_padding(k):
    bk = skinny_block_k(k)
    assert bk & (bk - 1) == 0 and 16 <= bk <= SKINNY_K
    if k <= MIN_K:
        assert bk >= k  # one step
        return
    pad = -k % bk
    fits = [b for b in (512, 256, 128) if (-k % b) * K_WASTE <= k]
    if fits:
        assert bk == fits[0] and pad * K_WASTE <= k
    else:
        assert pad == min(-k % b for b in (512, 256, 128))


def test_block_k_examples():
    # the decode benchmark's Llama MLP down projection (K = 1376): 128, not 512 (which pads 160 of 1536)
    assert skinny_block_k(1376) == 128
    assert skinny_block_k(4096) == 512 and skinny_block_k(768) == 256


def test_compiled_matvec_with_ragged_k_step():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(96, 1376, generator=g)
    x = torch.randn(1, 1376, generator=g)
    ws = w.to("spyre")
    f = torch.compile(lambda a: a @ ws.t())
    y = f(x.to("spyre")).cpu()
    ref = x.double() @ w.double().t()
    bound = (1376 + 2) * 2.0 ** -24 * (x.double().abs() @ w.double().abs().t())
    assert ((y.double() - ref).abs() <= bound).all()


@pytest.mark.parametrize("m", [1, 4])
@pytest.mark.parametrize("n", [1, 16, 20, 100, 512, 1024, 1376, 2048, 2049, 3200, 4096, 8192, 12800, 49155])
def test_block_n_keeps_the_busiest_core_near_its_share(n, m):
    """BLOCK_N: 64 while one round of programs covers n, else the tile whose busiest core moves the fewest
    bytes (memory is shared equally among the busy cores, so that core sets the time): its columns of the
    weight and, per program, the m rows of activations."""
    bn = skinny_block_n(n, m)
    if n <= SKINNY_N * NUM_CORES:
        assert bn == max(16, min(64, 1 << (n - 1).bit_length()))
        return
    assert bn in NARROW_N

    def busiest(b):
        p = -(-n // b)
        return -(-p // NUM_CORES) * NUM_CORES * (b + m)
    assert busiest(bn) == min(busiest(b) for b in NARROW_N)
    assert busiest(bn) <= busiest(SKINNY_N)


def test_block_n_examples():
    # Granite-8B decode: q/o (4096) and the bench models' widths keep 64; the MLP's 12800 at one row (200
    # programs of 64, 7 on some cores against 6.25 on average) takes 16, at 4 rows 32; the 49155-token lm_head 32
    assert skinny_block_n(4096) == 64 and skinny_block_n(8192) == 64 and skinny_block_n(1376) == 64
    assert skinny_block_n(12800, 1) == 16 and skinny_block_n(12800, 4) == 32
    assert skinny_block_n(49155, 1) == 32 and skinny_block_n(49155, 4) == 64


def test_compiled_matvec_with_narrow_n_tiles():
    # N = 3200 > 64 x 32: 16-column tiles (200 programs), each a 16-column slice of W
    g = torch.Generator().manual_seed(0)
    w = torch.randn(3200, 256, generator=g)
    x = torch.randn(1, 256, generator=g)
    assert skinny_block_n(3200) == 16
    ws = w.to("spyre")
    y = torch.compile(lambda a: a @ ws.t())(x.to("spyre")).cpu()
    ref = x.double() @ w.double().t()
    bound = (256 + 2) * 2.0 ** -24 * (x.double().abs() @ w.double().abs().t())
    assert ((y.double() - ref).abs() <= bound).all()
