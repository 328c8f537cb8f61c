"""benchmarks/plot.py: the bars and the table it draws from a run's JSON (no benchmark is run)."""
import os
import sys
from xml.etree import ElementTree

from conftest import TESTS_DIR

sys.path.insert(0, os.path.join(os.path.dirname(TESTS_DIR), "benchmarks"))
import plot  # noqa: E402


def run_json():
    def kernel(name, bound, spyre_cpu, torch_cpu, info=False):
        t = {"spyre": {"cpu_min": spyre_cpu}, "torch_out": {"cpu_min": torch_cpu},
             "ratio_cpu_time": spyre_cpu / torch_cpu}
        return {"kernel": name, "bound": bound, "info": info, "threads": {"1": t}}
    return {
        "machine": {"date": "2026-12-04", "commit": "abc1234", "cpu": "Some CPU <x86>", "cpus": 2},
        "kernels": {"threads": [1], "rows": [kernel("add", "memory", 1.2, 1.0),
                                             kernel("softmax", "memory", 1.8, 1.0),
                                             kernel("matmul_f32", "compute", 1.6, 1.0),
                                             kernel("matmul_f32_nowrap", "compute", 9.0, 1.0, info=True)]},
        "summary": [{"figure": "(1) add time / torch", "measured": "1.20x", "target": "<= 1.5x torch",
                     "met": "met"}],
    }


def test_one_bar_per_judged_kernel_as_spyre_time_over_the_reference():
    bars = plot.bars(run_json())
    assert [(b[0], round(b[1], 3), b[2]) for b in bars] == [
        ("add", 1.2, 1.5), ("softmax", 1.8, 1.5), ("matmul_f32", 1.6, 2.0)]  # the info row is left out


def test_svg_colours_each_bar_by_its_own_target_and_escapes_text():
    svg = plot.svg(run_json())
    ElementTree.fromstring(svg)  # well-formed XML
    assert svg.count('fill="#4c9a2a"') == 2 and svg.count('fill="#c0392b"') == 1  # softmax misses 1.5x
    assert "Some CPU &lt;x86&gt;" in svg and "abc1234" in svg


def test_markdown_is_the_summary():
    assert plot.markdown(run_json()).splitlines()[2] == "| (1) add time / torch | 1.20x | <= 1.5x torch | met |"
