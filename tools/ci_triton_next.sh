#!/usr/bin/env bash
# CI: the @triton.jit language and runtime tests under a newer Triton than run.sh pins (default 3.9.0).
# A second venv holds only that Triton; it reaches torch, numpy, pytest and this package (built in
# place) through the main venv's site-packages, placed after its own, so its Triton wins.
# torch.compile stays on the pinned Triton (torch pins its own), so no compile tests run here.
set -euo pipefail
cd "$(dirname "$0")/.."
TRITON_VERSION=${TRITON_VERSION:-3.9.0}
MAIN_VENV=$(realpath "${SPYRE_VENV:-.venv}")
VENV=${TRITON_NEXT_VENV:-/tmp/spyre-triton-$TRITON_VERSION}
[ -x "$VENV/bin/python" ] || python3.11 -m venv "$VENV" 2>/dev/null || python3 -m venv "$VENV"
"$VENV/bin/python" -c "import triton, sys; sys.exit(triton.__version__ != '$TRITON_VERSION')" 2>/dev/null \
    || "$VENV/bin/python" -m pip install -q --no-deps "triton==$TRITON_VERSION"
main_sp=$("$MAIN_VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
own_sp=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "import site; site.addsitedir('$main_sp')" > "$own_sp/zz_spyre_main_venv.pth"
"$VENV/bin/python" -c "import triton, torch, spyre_triton; print('triton', triton.__version__, 'torch', torch.__version__)"
# test_block_pointers.py is left out: Triton 3.9 removed block pointers (tl.make_block_ptr raises
# NotImplementedError "Block pointers have been removed in favor of the tensor descriptor API").
exec "$VENV/bin/python" -m pytest -q -n 2 -p no:cacheprovider "$@" \
    tests/language/test_jit.py tests/runtime/test_launcher.py tests/language/test_control_flow.py \
    tests/compiler/test_masks.py tests/language/test_atomics.py tests/language/test_random_and_debug.py \
    tests/language/test_tensor_descriptors.py tests/language/test_ldexp_integer_exponent.py
