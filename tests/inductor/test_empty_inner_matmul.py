"""Matmuls with an empty dimension compile on spyre: the Triton template makes no kernel for an empty
inner dimension, and then Inductor's own choices (the aten call) remain, so a matmul always has one.
Before, `[2,0] @ [0,2]` failed with NoValidChoicesError (linalg.multi_dot, linalg.pinv hit it)."""
import pytest
import torch

CASES = {
    "mm_empty_inner": (torch.mm, [(2, 0), (0, 2)]),
    "mm_empty_rows": (torch.mm, [(0, 3), (3, 2)]),
    "mm_empty_cols": (torch.mm, [(2, 3), (3, 0)]),
    "addmm_empty_inner": (lambda c, a, b: torch.addmm(c, a, b, beta=0.5), [(2, 2), (2, 0), (0, 2)]),
    "bmm_empty_inner": (torch.bmm, [(3, 2, 0), (3, 0, 2)]),
    "baddbmm_empty_inner": (torch.baddbmm, [(3, 2, 2), (3, 2, 0), (3, 0, 2)]),
    "multi_dot": (lambda a, b, c: torch.linalg.multi_dot([a, b, c]), [(2, 0), (0, 3), (3, 2)]),
}


@pytest.mark.parametrize("name", CASES)
def test_compiled_matmul_with_empty_dimension(name):
    fn, shapes = CASES[name]
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(*s, generator=gen) for s in shapes]
    torch._dynamo.reset()
    got = torch.compile(fn)(*[a.to("spyre") for a in args])
    torch.testing.assert_close(got.cpu(), fn(*args))
