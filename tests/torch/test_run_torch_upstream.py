"""tools/run_torch_upstream.py without PyTorch's test files: junit XML -> rows, the device-neutral test ids
that pair spyre's row with the CPU device's, the counts, and a crashing test file (small, made here)."""
import importlib.util
import os
import textwrap

import pytest

_spec = importlib.util.spec_from_file_location(
    "run_torch_upstream", os.path.join(os.path.dirname(__file__), "..", "..", "tools", "run_torch_upstream.py"))
rtu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rtu)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="2" skipped="2" tests="7">
 <testcase classname="test_view_ops.TestViewOpsPRIVATEUSE1" name="test_t_view_spyre" time="0.1"/>
 <testcase classname="test_view_ops.TestOldViewOpsSPYRE" name="test_ravel_spyre" time="0.2">
  <failure message="NotImplementedError: Could not run 'aten::_empty_affine_quantized' with arguments
from the 'spyre' backend.">traceback</failure></testcase>
 <testcase classname="test_view_ops.TestOldViewOpsSPYRE" name="test_narrow_spyre" time="0.0">
  <skipped type="pytest.skip" message="Only runs on cpu">skip</skipped></testcase>
 <testcase classname="test_view_ops.TestViewOpsPRIVATEUSE1" name="test_xf_spyre" time="0.0">
  <skipped type="pytest.xfail" message="expected">xfail</skipped></testcase>
 <testcase classname="test_view_ops.TestViewOpsPRIVATEUSE1" name="test_slow_spyre_float32" time="120">
  <failure message="Failed: Timeout (&gt;120.0s) from pytest-timeout.">t</failure></testcase>
 <testcase classname="test_view_ops.TestViewOpsPRIVATEUSE1" name="test_teardown_spyre" time="0.1"/>
 <testcase classname="test_view_ops.TestViewOpsPRIVATEUSE1" name="test_teardown_spyre" time="0.1">
  <error message="failed on teardown with &quot;RuntimeError: boom&quot;">e</error></testcase>
</testsuite></testsuites>"""


def test_parse_junit_maps_each_testcase_to_one_row():
    rows = rtu.parse_junit(JUNIT, "test_view_ops.py")
    got = {t: (r["outcome"], r["reason"]) for t, r in rows.items()}
    assert got == {
        "test_view_ops.py::TestViewOpsPRIVATEUSE1::test_t_view_spyre": ("pass", ""),
        "test_view_ops.py::TestOldViewOpsSPYRE::test_ravel_spyre":
            # an attribute's line break reads as a space (XML attribute normalisation)
            ("fail", "NotImplementedError: Could not run 'aten::_empty_affine_quantized' with arguments "
                     "from the 'spyre' backend."),
        "test_view_ops.py::TestOldViewOpsSPYRE::test_narrow_spyre": ("skip", "Only runs on cpu"),
        "test_view_ops.py::TestViewOpsPRIVATEUSE1::test_xf_spyre": ("xfail", "expected"),
        "test_view_ops.py::TestViewOpsPRIVATEUSE1::test_slow_spyre_float32":
            ("timeout", "Failed: Timeout (>120.0s) from pytest-timeout."),
        # the call passed, the teardown failed: the worse of the two is kept
        "test_view_ops.py::TestViewOpsPRIVATEUSE1::test_teardown_spyre":
            ("error", 'failed on teardown with "RuntimeError: boom"'),
    }
    assert rtu.counts(rows) == {"pass": 1, "fail": 1, "error": 1, "skip": 1, "xfail": 1, "xpass": 0,
                                "timeout": 1, "crash": 0}


def test_long_reasons_are_cut_to_one_short_line():
    xml = ('<testsuite><testcase classname="m.C" name="t"><failure message="%s&#10;second line"/>'
           '</testcase></testsuite>' % ("x" * 500))
    reason = rtu.parse_junit(xml, "m.py")["m.py::C::t"]["reason"]
    assert len(reason) == rtu.REASON_CHARS and reason.endswith("...") and "second" not in reason


def test_a_file_that_fails_to_import_is_one_error_row_with_the_exception():
    xml = ('<testsuite><testcase classname="" name="test_binary_ufuncs"><error message="collection failure">'
           "ImportError while importing test module 'x.py'.\nTraceback:\n  ...\n"
           "E   ImportError: cannot import name 'binary_ufuncs_and_refs' from 'torch.testing'"
           '</error></testcase></testsuite>')
    rows = rtu.parse_junit(xml, "test_binary_ufuncs.py")
    assert rows == {"test_binary_ufuncs.py::(collection)": {
        "test": "test_binary_ufuncs.py::(collection)", "outcome": "error",
        "reason": "ImportError: cannot import name 'binary_ufuncs_and_refs' from 'torch.testing'"}}


def test_a_testcase_from_another_file_is_an_error():
    with pytest.raises(ValueError, match="not from test_view_ops.py"):
        rtu.parse_junit('<testsuite><testcase classname="other.C" name="t"/></testsuite>', "test_view_ops.py")


@pytest.mark.parametrize("tid, generic", [
    ("f.py::TestViewOpsPRIVATEUSE1::test_t_spyre", "f.py::TestViewOps::test_t"),
    ("f.py::TestViewOpsCPU::test_t_cpu", "f.py::TestViewOps::test_t"),
    ("f.py::TestOldViewOpsSPYRE::test_conj_self_spyre_float32", "f.py::TestOldViewOps::test_conj_self_float32"),
    ("f.py::TestOldViewOpsCPU::test_cpu_thing_cpu_int64", "f.py::TestOldViewOps::test_cpu_thing_int64"),
])
def test_generic_id_pairs_a_test_across_devices(tid, generic):
    assert rtu.generic_id(tid) == generic


def test_summary_lists_spyre_failures_with_the_cpu_outcome():
    spyre = rtu.parse_junit(JUNIT, "test_view_ops.py")
    cpu = {"test_view_ops.py::TestOldViewOpsCPU::test_ravel_cpu":
           {"test": "test_view_ops.py::TestOldViewOpsCPU::test_ravel_cpu", "outcome": "pass", "reason": ""}}
    text = rtu.summary_text({"test_view_ops.py": {"spyre": spyre, "cpu": cpu}})
    assert "| test_view_ops.py | spyre | 6 | 1 | 1 | 1 | 1 | 1 | 0 | 1 | 0 |" in text
    assert "| test_view_ops.py | cpu | 1 | 1 | 0 |" in text
    line = next(ln for ln in text.splitlines() if "test_ravel_spyre" in ln)
    assert "| fail | pass |" in line
    assert "not run" in next(ln for ln in text.splitlines() if "test_slow_spyre" in ln)
    assert "| test_view_ops.py | spyre | 1 | Only runs on cpu |" in text
    assert "## The CPU device's tests that do not pass (0)" in text


def test_a_crashing_test_is_recorded_and_the_rest_still_run(tmp_path):
    (tmp_path / "test_boom.py").write_text(textwrap.dedent("""
        import os
        def test_a(): pass
        def test_b(): os.abort()
        def test_c(): assert 1 == 2, "c fails"
    """))
    rows = rtu.run_file(str(tmp_path), "test_boom.py", "cpu", 60, 120, str(tmp_path / "xml"), compat=False)
    got = {t: r["outcome"] for t, r in rows.items()}
    assert got == {"test_boom.py::test_a": "pass", "test_boom.py::test_b": "crash", "test_boom.py::test_c": "fail"}
    assert "SIGABRT" in rows["test_boom.py::test_b"]["reason"]


def test_a_file_over_its_time_keeps_what_ran_and_marks_the_running_test(tmp_path):
    (tmp_path / "test_slow.py").write_text(textwrap.dedent("""
        import time
        def test_a(): pass
        def test_b(): time.sleep(60)
        def test_c(): pass
    """))
    rows = rtu.run_file(str(tmp_path), "test_slow.py", "cpu", 120, 6, str(tmp_path / "xml"), compat=False)
    got = {t: r["outcome"] for t, r in rows.items()}
    assert got == {"test_slow.py::test_a": "pass", "test_slow.py::test_b": "timeout"}
    assert "--file-timeout 6 s" in rows["test_slow.py::test_b"]["reason"]


def test_the_file_timeout_works_when_the_runner_ignores_sigint(tmp_path):
    # as under nohup or `cmd &` in a script: the runner's SIGINT is ignored, and pytest must not inherit that
    import signal
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        test_a_file_over_its_time_keeps_what_ran_and_marks_the_running_test(tmp_path)
    finally:
        signal.signal(signal.SIGINT, old)


def test_k_selects_merges_and_aliases_let_an_older_file_import(tmp_path):
    # a file of another PyTorch version: it imports the old name of the wheel's binary_ufuncs
    (tmp_path / "test_old.py").write_text(textwrap.dedent("""
        from torch.testing._internal.common_methods_invocations import binary_ufuncs, binary_ufuncs_and_refs
        def test_same_ops(): assert [op.name for op in binary_ufuncs_and_refs] == [op.name for op in binary_ufuncs]
        def test_not_selected(): assert False
    """))
    xml, out = tmp_path / "xml", tmp_path / "out"
    earlier = {"test_old.py::test_from_an_earlier_run": {"test": "test_old.py::test_from_an_earlier_run",
                                                         "outcome": "fail", "reason": "kept"}}
    rtu.write_csv(rtu.csv_path(str(out), "test_old.py", "cpu"), earlier)
    rtu.main(["run", "--tests", str(tmp_path), "--files", "test_old.py", "--device", "cpu", "-k", "same_ops",
              "--out", str(out), "--xml-dir", str(xml)])
    rows = rtu.read_csv(rtu.csv_path(str(out), "test_old.py", "cpu"))
    # the selected test ran; a -k run keeps the CSV's other rows
    assert {t: r["outcome"] for t, r in rows.items()} == {"test_old.py::test_same_ops": "pass",
                                                          "test_old.py::test_from_an_earlier_run": "fail"}
    added = (xml / "test_old-cpu.aliases").read_text().split()
    assert "torch.testing._internal.common_methods_invocations.binary_ufuncs_and_refs" in added
    rows = rtu.run_file(str(tmp_path), "test_old.py", "cpu", 120, 600, str(xml), compat=False)
    assert [r["outcome"] for r in rows.values()] == ["error"]
    assert "binary_ufuncs_and_refs" in rows["test_old.py::(collection)"]["reason"]


def test_aliases_fill_only_missing_names(monkeypatch):
    import types
    mod = types.ModuleType("fake_cmi")
    mod.present = "the wheel's own"
    monkeypatch.setitem(__import__("sys").modules, "fake_cmi", mod)
    monkeypatch.setattr(rtu, "COMPAT_ALIASES", {("fake_cmi", "present"): lambda m: "alias",
                                                ("fake_cmi", "missing"): lambda m: "alias"})
    assert rtu.add_compat_aliases() == ["fake_cmi.missing"]
    assert (mod.present, mod.missing) == ("the wheel's own", "alias")


def test_old_skip_ops_alias_decorates_only_the_test_it_names():
    from torch.testing._internal.common_device_type import xfail
    old_skip_ops = rtu._skip_ops_by_name(None)

    class TestCommon:
        def test_meta(self): pass

    fn = old_skip_ops("TestCommon", "test_meta", {xfail("mode")})(TestCommon.test_meta)
    (info,) = fn._op_overrides["mode"]   # what the wheel's skipOps records for ops() to apply
    assert (info.cls_name, info.test_name) == ("TestCommon", "test_meta")
    with pytest.raises(ValueError, match="decorates .*TestCommon.test_meta"):
        old_skip_ops("TestCommon", "test_other", {xfail("mode")})(TestCommon.test_meta)
