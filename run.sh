#!/usr/bin/env bash
# One entry point for a fresh machine: sets up .venv (torch 2.13 CPU, triton 3.7.1, this package
# built in place), then runs what you ask for.
#   ./run.sh demo     Triton kernels and a compiled model on the simulated Spyre device
#   ./run.sh test     the test suite (extra pytest arguments pass through)
#   ./run.sh bench    the benchmarks of benchmarks/README.md (installs transformers for the model section;
#                     extra arguments pass through, e.g. ./run.sh bench --quick)
#   ./run.sh fuzz N   N random kernels on spyre against Triton's interpreter (tools/fuzz.py; --seed S, --family F)
#   ./run.sh sanitize the runtime and device built with ASan + UBSan into build/sanitize (the normal build
#                     is untouched), then the runtime, language and fuzz-smoke tests under it (extra
#                     arguments replace that selection); `sanitize tsan`: the allocation table and the
#                     worker pool under host threads with ThreadSanitizer (tools/devmem_stress.c,
#                     tools/tsan_launch.py)
#   ./run.sh setup    only the set-up
set -euo pipefail
cd "$(dirname "$0")"
VENV=${SPYRE_VENV:-.venv}
PY="$VENV/bin/python"

setup() {
    [ -x "$PY" ] || python3.11 -m venv "$VENV" 2>/dev/null || python3 -m venv "$VENV"
    # The dependency checks must not load this package's extensions (torch autoloads them): a stale
    # build from older sources would fail the import and stop the set-up that is about to rebuild it.
    if ! TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" -c "import torch, triton, numpy, pytest, xdist, scipy, expecttest" 2>/dev/null; then
        "$PY" -m pip install -q --upgrade pip setuptools wheel
        "$PY" -m pip install -q torch==2.13.0 triton==3.7.1 numpy pytest pytest-xdist scipy expecttest
    fi
    # The build takes minutes (the typed loops compile three times): skip it when nothing it compiles, nor
    # the torch it compiles against, changed since the last one.
    local stamp="$VENV/.spyre-build-stamp" sum
    sum=$( { cat setup.py pyproject.toml runtime/* spyre_triton/csrc/*; TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" -c "import torch; print(torch.__version__)"; } | sha256sum | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] && ls spyre_triton/_runtime.*.so spyre_triton/_device.*.so >/dev/null 2>&1 \
        && "$PY" -c "import torch, spyre_triton._runtime, spyre_triton._device" 2>/dev/null; then
        return
    fi
    rm -f "$stamp"
    # The torch extension builds against the installed torch, so no build isolation.
    TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" -m pip install -q --no-build-isolation --no-deps -e .
    echo "$sum" > "$stamp"
}

# A copy of the package whose extensions are built with sanitizers: the Python files are links to the
# worktree's, the .so files its own; PYTHONPATH puts it before the editable install.
sanitized_build() {
    local out=$1 flags=$2
    mkdir -p "$out/spyre_triton"
    for f in spyre_triton/*; do
        case $f in *.so) ;; *) ln -sfn "$PWD/$f" "$out/$f" ;; esac
    done
    ln -sfn "$PWD/backend" "$out/spyre_triton/backend"
    # extra_compile_args (-O3) follow CFLAGS; -g and frame pointers make the reports readable
    CFLAGS="$flags -g -fno-omit-frame-pointer" LDFLAGS="$flags" \
        "$PY" setup.py -q build_ext -j 2 --build-lib "$out" --build-temp "$out/tmp" >"$out/build.log" 2>&1 \
        || { tail -30 "$out/build.log"; exit 1; }
}

sanitize() {
    if [ "${1:-}" = tsan ]; then
        # The allocation table under host threads, alone (a C program); then the runtime extension built
        # with -fsanitize=thread, loaded without torch into a python whose other code is not
        # instrumented, running launches from 4 host threads over the worker pool (tools/tsan_launch.py).
        mkdir -p build/tsan
        gcc -O1 -g -fsanitize=thread -Iruntime tools/devmem_stress.c runtime/devmem.c -o build/tsan/devmem_stress -lpthread
        TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}" build/tsan/devmem_stress 2>&1 | tee build/tsan/devmem.log
        local so="build/tsan/_runtime$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")"
        gcc -O1 -g -fsanitize=thread -DSPY_BASELINE_ONLY -fPIC -shared -std=c11 -fno-strict-aliasing -fno-math-errno -Iruntime \
            -I"$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")" runtime/*.c -o "$so" -lpthread -lm
        "$PY" tools/tsan_launch.py prepare build/tsan/kernels
        TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0 ${TSAN_OPTIONS:-}" \
        LD_PRELOAD="$(gcc -print-file-name=libtsan.so)" PYTHONSAFEPATH=1 \
            "$PY" tools/tsan_launch.py run build/tsan/kernels "$so" 2>&1 | tee build/tsan/launch.log
        # what tools/reliability_report.py reports (a report stops the run above: halt_on_error, pipefail)
        { echo "$(date -u +%F) $(git rev-parse --short HEAD)"
          echo "allocation table: $(tail -1 build/tsan/devmem.log)"
          echo "worker pool: $(tail -1 build/tsan/launch.log)"
          echo "ThreadSanitizer reports: $(cat build/tsan/*.log | grep -c 'WARNING: ThreadSanitizer' || true)"; } > build/tsan/summary.txt
        return
    fi
    local tests=("$@")
    # the typed loops' SIMD builds are left out (SPY_BASELINE_ONLY): the same source as the baseline,
    # they were two thirds of the instrumented build's time
    sanitized_build build/sanitize "-fsanitize=address,undefined -fno-sanitize-recover=undefined -DSPY_BASELINE_ONLY"
    if [ ${#tests[@]} -eq 0 ]; then
        for d in tests/runtime tests/language tests/fuzz; do [ -d "$d" ] && tests+=("$d"); done
    fi
    # python is not instrumented, so libasan must come first; libstdc++ with it, or torch's C++
    # exceptions (thrown through an intercepted __cxa_throw) trip ASan. Python's and torch's own
    # allocations are not leaks to report.
    local log=build/sanitize/pytest.log rc=0
    # PYTHONSAFEPATH: the working directory's spyre_triton (the normal build) must not come first
    export PYTHONSAFEPATH=1
    PYTHONPATH="$PWD/build/sanitize" LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0 \
        "$PY" -c "import torch, spyre_triton._runtime as r; assert '/build/sanitize/' in r.__file__, r.__file__"
    ASAN_OPTIONS="detect_leaks=0 abort_on_error=1 ${ASAN_OPTIONS:-}" UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1" \
    LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
    PYTHONPATH="$PWD/build/sanitize" \
        "$PY" -m pytest -q -n 2 -p no:cacheprovider "${tests[@]}" 2>&1 | tee "$log" || rc=$?
    # what tools/reliability_report.py reports
    { echo "$(date -u +%F) $(git rev-parse --short HEAD): ${tests[*]}"; tail -1 "$log"
      echo "sanitizer reports: $(grep -c 'ERROR: AddressSanitizer\|runtime error:' "$log" || true)"; } > build/sanitize/summary.txt
    return $rc
}

cmd=${1:-test}
shift || true
case "$cmd" in
    setup) setup ;;
    demo) setup; exec "$PY" -m spyre_triton.demo "$@" ;;
    test) setup; exec "$PY" -m pytest -q -n 2 "$@" tests ;;
    bench)
        setup
        # the model section builds GPT-2- and BERT-style models from transformers' configs
        "$PY" -c "import transformers" 2>/dev/null || "$PY" -m pip install -q transformers
        exec "$PY" benchmarks/run.py "$@" ;;
    fuzz) setup; exec "$PY" tools/fuzz.py "$@" ;;
    sanitize) setup; sanitize "$@" ;;
    *) echo "usage: ./run.sh demo|test|bench|fuzz|sanitize|setup" >&2; exit 2 ;;
esac
