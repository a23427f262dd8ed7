#!/usr/bin/env bash
# The sdist, installed as a user without our wheel would (make sdist-check):
#   1. `pip install SDIST` with pip's default build isolation stops at once (no torch in the
#      isolated environment: pyproject's build requires leave it out) with setup.py's one
#      sentence naming --no-build-isolation, before any download of torch or compile;
#   2. `pip install --no-build-isolation SDIST` compiles the CPU extension against the venv's
#      torch, and tools/installed_smoke.py passes on the result, from outside the tree.
# The venv VENV is fresh; it borrows BASE's packages (torch, setuptools, wheel, ninja) with
# a .pth line, as tools/torch_venv.sh's throwaway venvs do, so nothing is downloaded.
#
#   tools/sdist_check.sh SDIST BASE_VENV VENV
set -euo pipefail
sdist=$(realpath "$1")
base=$(realpath "$2")
venv=$3
root=$(realpath "$(dirname "$0")/..")
PY=${PY:-python3}

rm -rf "$venv"
"$PY" -m venv "$venv"
venv=$(realpath "$venv")
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
# Every site-packages folder BASE sees: .venv sees the system's too (packaging, for one).
"$base/bin/python" -c "import sys; print('\n'.join(p for p in sys.path if p.endswith('-packages')))" \
  >"$site/_fastsoftmax_base.pth"

cd /tmp  # pip must not see the checkout
log=$(mktemp)
start=$SECONDS
if "$venv/bin/python" -m pip install --no-deps "$sdist" >"$log" 2>&1; then
  echo "sdist_check: FAIL the isolated build went on (it should stop for want of torch)"
  exit 1
fi
took=$((SECONDS - start))
if ! grep -q "build with \`pip install --no-build-isolation fastsoftmax\`" "$log"; then
  cat "$log"
  echo "sdist_check: FAIL the isolated build failed without setup.py's sentence"
  exit 1
fi
echo "sdist_check: ok the isolated build stopped after ${took} s: $(grep -o 'fastsoftmax builds against.*' "$log" | head -1)"

start=$SECONDS
PATH="$base/bin:$PATH" MAX_JOBS=${MAX_JOBS:-2} \
  "$venv/bin/python" -m pip install -q --no-build-isolation --no-deps "$sdist"
echo "sdist_check: ok built and installed with --no-build-isolation in $((SECONDS - start)) s"
"$venv/bin/python" "$root/tools/installed_smoke.py" --tree "$root"
