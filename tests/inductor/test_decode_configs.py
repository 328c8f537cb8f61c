"""K steps of the skinny matmul tiles (spyre_triton/decode_configs.py): at most a sixteenth of padding
where a power of two in [128, 512] allows it, one step for short reductions, and the result of a
compiled M = 1 matmul whose K step is ragged equals torch's within fp32 accumulation."""
import pytest
import torch

from spyre_triton.decode_configs import K_WASTE, MIN_K, SKINNY_K, skinny_block_k


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
