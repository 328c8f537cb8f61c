"""The backend's stages pass data only through (src, metadata), as Triton's own backends do, and its
options are checked once, where Triton parses them (backend/compiler.py)."""
import pytest
import torch
import triton
import triton.language as tl
from triton.backends import backends

import spyre_triton.asm as asm_mod
from spyre_triton import config

from conftest import DEVICE
Backend = backends["spyre"].compiler


@triton.jit
def k_scale(x_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs) * 2)


def _stages(**opts):
    backend = Backend(triton.runtime.driver.active.get_current_target())
    options = backend.parse_options(opts)
    stages = {}
    backend.add_stages(stages, options)
    return stages, options


def _ttir():
    x = torch.empty(16, device=DEVICE)
    return k_scale.warmup(x, x, N=16, grid=(1,)).asm["ttir"]


def test_spyrebin_encodes_the_program_spyreasm_handed_it_in_the_metadata(monkeypatch):
    from spyre_triton.compiler import lower, ttir
    stages, options = _stages()
    prog = lower.lower_module(ttir.parse_module(_ttir()), options.lx_bytes, True, True)
    asm = prog.to_asm()
    metadata = {"spyre_program": (asm, prog)}

    def no_parse(_):
        raise AssertionError("the printed program should be encoded, not its text parsed back")
    monkeypatch.setattr(asm_mod, "parse_asm", no_parse)
    assert stages["spyrebin"](asm, metadata) == prog.encode()
    assert "spyre_program" not in metadata  # nothing left for Triton to write into the cache's JSON


def test_spyrebin_parses_text_that_replaced_the_printed_one():
    from spyre_triton.compiler import lower, ttir
    stages, options = _stages()
    prog = lower.lower_module(ttir.parse_module(_ttir()), options.lx_bytes, True, True)
    printed = prog.to_asm()
    override = "".join(list(printed))  # the same text, another object: as read from an override's file
    assert override is not printed
    metadata = {"spyre_program": (printed, None)}  # were it used, encoding None would fail
    assert stages["spyrebin"](override, metadata) == asm_mod.parse_asm(printed).encode()


def test_a_compile_leaves_no_program_in_the_metadata():
    x = torch.empty(16, device=DEVICE)
    ck = k_scale.warmup(x, x, N=32, grid=(1,))
    assert not hasattr(ck.metadata, "spyre_program")
    assert ck.asm["spyrebin"] == asm_mod.parse_asm(ck.asm["spyreasm"]).encode()


@pytest.mark.parametrize("lx", [0, -64, config.LX_BYTES + 64])
def test_an_lx_budget_the_core_does_not_have_is_refused(lx):
    with pytest.raises(ValueError, match=rf"lx_bytes={lx}.*at most the {config.LX_BYTES} bytes"):
        _stages(lx_bytes=lx)


def test_the_whole_lx_is_a_valid_budget():
    _, options = _stages(lx_bytes=config.LX_BYTES)
    assert options.lx_bytes == config.LX_BYTES
