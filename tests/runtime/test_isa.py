"""The ISA table and what is derived from it: generated files, encoding and assembly round trips."""
import pytest

from spyre_triton import isa, isa_gen

from asm_helpers import ArgSpec, AsmError, Program, parse_asm


def test_generated_files_are_current():
    assert isa_gen.main(["--check"]) == 0, "run: python -m spyre_triton.isa_gen"


def test_opcode_table_is_consistent():
    assert [op.code for op in isa.OPCODES] == list(range(len(isa.OPCODES)))
    assert len({op.name for op in isa.OPCODES}) == len(isa.OPCODES)
    for op in isa.OPCODES:
        fields = op.fields
        assert len(fields) == len(set(fields)) and set(fields) <= set(isa.FIELDS), op.name
        bits = 0
        for fl in op.flags:
            assert bits & fl.mask == 0, f"{op.name}: flag {fl.name} overlaps"
            bits |= fl.mask
            if fl.enum:
                assert len(isa.ENUMS[fl.enum]) <= 1 << fl.bits, f"{op.name}.{fl.name} too narrow"


def test_every_operand_has_a_role():
    """The runtime's decode and the performance model loop over the operand table: every memory
    operand has an access and a size rule, every broadcast flag names an operand that can be one
    element, and the view bits are the operands that may name a view register."""
    for op in isa.OPCODES:
        roles = op.roles
        assert [r.field for r in roles] == op.fields, op.name
        for r in roles:
            memory = r.kind in ("v", "v?", "s", "d", "w", "w?")
            assert (r.size is not None) == memory and (r.access is not None) == memory, (op.name, r)
            assert r.size is None or r.size in isa.SIZES, (op.name, r)
            if r.bcast:
                assert r.size in isa.ONE_ELEMENT and r.bcast in {fl.name for fl in op.flags}, (op.name, r)
        bcast_flags = {fl.name for fl in op.flags if fl.name.startswith("bc")}
        assert bcast_flags == {r.bcast for r in roles if r.bcast}, f"{op.name}: a broadcast flag names no operand"
        assert op.cost in isa.COSTS and (op.flops == 0 or op.cost in ("vector", "divide", "sfu", "reduce"))
        for f in op.view_fields:
            assert next(r for r in roles if r.field == f).kind == "v", op.name


def test_float_formats_match_the_dtype_widths():
    for d in isa.DTYPES:
        assert (d.fmt is not None) == (d.kind == "float"), d.name
        if d.fmt:
            assert 1 + d.fmt.ebits + d.fmt.mbits == 8 * d.nbytes and d.fmt.style in isa.FLOAT_STYLES, d.name


def _sample(op: isa.Opcode) -> isa.Insn:
    """An instruction using every operand and flag of `op` with distinct values."""
    args = {f: 8 * (i + 1) for i, f in enumerate(op.fields)}
    flags = {}
    for fl in op.flags:
        flags[fl.name] = isa.enum_name(fl.enum, len(isa.ENUMS[fl.enum]) - 1) if fl.enum else (1 << fl.bits) - 1
    t2 = "f16" if op.uses_t2 else "i1"
    return isa.Insn(op.name, "f32", t2, args, flags)


@pytest.mark.parametrize("op", isa.OPCODES, ids=lambda o: o.name)
def test_encode_decode_round_trip(op):
    insn = _sample(op)
    raw = isa.encode_insn(insn)
    assert len(raw) == isa.INSN_BYTES
    back = isa.decode_insn(raw)
    assert (back.op, back.t, back.t2, back.args) == (insn.op, insn.t, insn.t2, insn.args)
    assert {k: v for k, v in back.flags.items() if v} == {k: v for k, v in insn.flags.items() if v}


def _program():
    prog = Program("k", n_sregs=8, lx_bytes=4096)
    prog.args = [ArgSpec("x_ptr", "ptr", "f32", 0), ArgSpec("n", "int", "i32", 8)]
    prog.consts = [0x3F800000, 0xFFFFFFFFFFFFFFFF]
    prog.descs = [isa.Descriptor((16, 64), (("s", 16), 4)), isa.Descriptor((8,), (0,))]
    prog.strings = ['he said "hi", then # left']
    prog.locs = [("/tmp/k.py", 7, "    x = tl.load(x_ptr + offs)  # comment")]
    for op in isa.OPCODES:
        insn = _sample(op)
        for f, kind, _ in op.operands:
            if kind == "l":
                insn.args[f] = 0
            elif kind == "d":
                insn.args[f] = 1
            elif kind == "k":
                insn.args[f] = 1
            elif kind == "str":
                insn.args[f] = 0
        insn.loc = 0
        prog.insns.append(insn)
    return prog


def test_assembly_and_binary_round_trip():
    prog = _program()
    asm = prog.to_asm()
    assert parse_asm(asm).to_asm() == asm
    raw = prog.encode()
    again = Program.decode(raw)
    assert again.to_asm() == asm
    assert again.encode() == raw
    assert "# k.py:7: x = tl.load(x_ptr + offs)" in asm


@pytest.mark.parametrize("bad", ["frobnicate.f32 x0", "add.f32 x0, x0", ".bogus 1", "add.f32 y0, x0, x0, 4"])
def test_bad_assembly_is_a_clear_error(bad):
    with pytest.raises(AsmError, match="line 1"):
        parse_asm(bad)


def test_bad_binary_is_a_clear_error():
    with pytest.raises(ValueError, match="magic"):
        Program.decode(b"XXXX" + bytes(64))


def test_disassembler_reproduces_the_compilers_assembly(tmp_path):
    import subprocess
    import sys

    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    x = torch.zeros(8, device=triton.runtime.driver.active.get_active_torch_device())
    k = scale.warmup(x, 8, BLOCK=64, grid=(1,))
    path = tmp_path / "scale.spyrebin"
    path.write_bytes(k.asm["spyrebin"])
    out = subprocess.run([sys.executable, "-m", "spyre_triton.disasm", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == k.asm["spyreasm"]
    bad = tmp_path / "bad.spyrebin"
    bad.write_bytes(k.asm["spyrebin"][:40])
    out = subprocess.run([sys.executable, "-m", "spyre_triton.disasm", str(bad)], capture_output=True, text=True)
    assert out.returncode == 1 and "truncated" in out.stderr
