#!/usr/bin/env bash
# One entry point for a fresh machine: sets up .venv (torch 2.13 CPU, triton 3.7.1, this package
# built in place), then runs what you ask for.
#   ./run.sh demo     Triton kernels and a compiled model on the simulated Spyre device
#   ./run.sh test     the test suite (extra pytest arguments pass through)
#   ./run.sh bench    the benchmarks of benchmarks/README.md (installs transformers for the model section;
#                     extra arguments pass through, e.g. ./run.sh bench --quick)
#   ./run.sh fuzz N   N random kernels on spyre against Triton's interpreter (tools/fuzz.py; --seed S, --family F)
#   ./run.sh setup    only the set-up
set -euo pipefail
cd "$(dirname "$0")"
VENV=${SPYRE_VENV:-.venv}
PY="$VENV/bin/python"

setup() {
    [ -x "$PY" ] || python3.11 -m venv "$VENV" 2>/dev/null || python3 -m venv "$VENV"
    if ! "$PY" -c "import torch, triton, numpy, pytest, xdist, scipy" 2>/dev/null; then
        "$PY" -m pip install -q --upgrade pip setuptools wheel
        "$PY" -m pip install -q torch==2.13.0 triton==3.7.1 numpy pytest pytest-xdist scipy
    fi
    # The build takes minutes (the typed loops compile three times): skip it when nothing it compiles, nor
    # the torch it compiles against, changed since the last one.
    local stamp="$VENV/.spyre-build-stamp" sum
    sum=$( { cat setup.py pyproject.toml runtime/* spyre_triton/csrc/*; "$PY" -c "import torch; print(torch.__version__)"; } | sha256sum | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] && ls spyre_triton/_runtime.*.so spyre_triton/_device.*.so >/dev/null 2>&1 \
        && "$PY" -c "import torch, spyre_triton._runtime, spyre_triton._device" 2>/dev/null; then
        return
    fi
    rm -f "$stamp"
    # The torch extension builds against the installed torch, so no build isolation.
    "$PY" -m pip install -q --no-build-isolation --no-deps -e .
    echo "$sum" > "$stamp"
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
    *) echo "usage: ./run.sh demo|test|bench|fuzz|sanitize|setup" >&2; exit 2 ;;
esac
