"""Op handlers register explicitly: each handler module (one per TTIR dialect family) fills its own
table and lower.py merges them; an op handled twice is an error, not an import-order override."""
import pytest

from spyre_triton.compiler import lower, ops, ops_arith, ops_scaled_dot, ops_scf, ops_tensor, registry


def test_each_op_has_one_handler_from_one_module():
    modules = (ops_arith, ops, ops_scf, ops_tensor, ops_scaled_dot)
    assert sum(len(m.HANDLERS) for m in modules) == len(lower.LOWER)
    for m in modules:
        for name, fn in m.HANDLERS.items():
            assert lower.LOWER[name] is fn and fn.__module__ == m.__name__


def test_scf_is_lowered_by_its_own_module():
    for name in ("scf.for", "scf.if", "scf.while"):
        assert name in ops_scf.HANDLERS and lower.LOWER[name].__module__ == ops_scf.__name__


def test_arith_and_math_are_lowered_by_their_own_module():
    for name in lower.LOWER:
        if name.startswith(("arith.", "math.")):
            assert lower.LOWER[name].__module__ == ops_arith.__name__, name


def test_a_second_handler_for_an_op_is_refused():
    handlers, handles = registry.table()
    handles("x.op")(lambda L, op: None)
    with pytest.raises(ValueError, match="two handlers for x.op"):
        handles("x.op")(lambda L, op: None)


def test_two_modules_handling_one_op_are_refused():
    class A:
        __name__ = "a"
        HANDLERS = {"x.op": lambda L, op: None}

    class B:
        __name__ = "b"
        HANDLERS = {"x.op": lambda L, op: None}
    with pytest.raises(ValueError, match="x.op is lowered by both"):
        registry.merge(A, B)
