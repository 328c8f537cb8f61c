"""Build spyre-triton: the runtime (C, no torch) and the torch device (C++ against torch).

Install with `pip install --no-build-isolation -e .` after torch is installed: the torch
extension compiles against the installed torch, which an isolated build would not see.
"""
import os
from setuptools import Extension, setup

from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME_SOURCES = sorted(
    os.path.join("runtime", f) for f in os.listdir(os.path.join(HERE, "runtime")) if f.endswith(".c"))
# headers: a change to any of them rebuilds the runtime (setuptools does not scan #includes)
RUNTIME_HEADERS = sorted(
    os.path.join("runtime", f) for f in os.listdir(os.path.join(HERE, "runtime")) if f.endswith(".h"))

runtime = Extension(
    "spyre_triton._runtime",
    sources=RUNTIME_SOURCES,
    depends=RUNTIME_HEADERS,
    include_dirs=["runtime"],
    # -fno-math-errno: no errno from libm (nothing reads it), which lets gcc vectorise sqrt loops
    extra_compile_args=["-O3", "-std=c11", "-fno-strict-aliasing", "-fno-math-errno", "-Wall", "-Wno-unused-function",
                        "-march=x86-64-v2" if os.uname().machine == "x86_64" else "-O3"],
    extra_link_args=["-lpthread", "-lm"],
)

device = CppExtension(
    "spyre_triton._device",
    sources=["spyre_triton/csrc/device.cpp", "spyre_triton/csrc/profiler.cpp"],
    # kineto: the profiler headers the torch wheel ships (torch.profiler's PrivateUse1 device track)
    include_dirs=["runtime"] + [os.path.join(p, "kineto") for p in include_paths()],
    extra_compile_args=["-O2", "-std=c++20"],
)

setup(
    name="spyre-triton",
    version="0.1.0",
    description="A Triton backend and C interpreter for IBM's Spyre accelerator, without the hardware",
    python_requires=">=3.11",
    packages=["spyre_triton", "spyre_triton.compiler", "spyre_triton.perf", "spyre_triton.inductor",
              "spyre_triton.distributed", "spyre_triton.backend"],
    package_dir={"spyre_triton.backend": "backend"},
    package_data={"spyre_triton": ["csrc/*.cpp"]},
    ext_modules=[runtime, device],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
    # Ranges, so installing never downgrades what a user has: the extension builds against the installed
    # torch; direct @triton.jit kernels work with Triton 3.7-3.9 (torch.compile uses the one torch pins).
    # run.sh pins the versions the suite runs by default.
    install_requires=["torch>=2.13.0,<2.14", "triton>=3.7.1,<3.10", "numpy"],
    extras_require={"test": ["pytest", "pytest-xdist", "scipy"]},
    entry_points={
        "triton.backends": ["spyre = spyre_triton.backend"],
        "torch.backends": ["spyre = spyre_triton:_autoload"],
    },
)
