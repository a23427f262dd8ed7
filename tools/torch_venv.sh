#!/usr/bin/env bash
# The CI venv of one torch, cached outside the clone, and throwaway venvs that borrow it.
#
#   tools/torch_venv.sh cached              print the cached venv's path, creating it (or adding
#                                           what is missing) first
#   tools/torch_venv.sh throwaway DIR       a fresh venv at DIR that sees the cached venv's
#                                           packages (a .pth line) but installs its own, so a
#                                           wheel installed there leaves the cache untouched
#
# CI_TORCH (default 2.14.1; from the package index that is the CUDA 13.0 build, about 5 GB)
# and CI_CACHE (default ~/.cache/fastsoftmax-ci) choose the venv:
# $CI_CACHE/torch-$CI_TORCH-<cuda tag>. A fresh machine creates it once (about a minute
# with a local index); later runs reuse it.
set -euo pipefail
CI_TORCH=${CI_TORCH:-2.14.1}
CI_CACHE=${CI_CACHE:-$HOME/.cache/fastsoftmax-ci}
PY=${PY:-python3}
# What the tests, the CUDA build and the ABI gate need besides torch. pytest below 9.2:
# pytest-xdist 3.8's --dist loadgroup renames Item._nodeid, which pytest 9.2 no longer reads
# (the groups of tests/conftest.py would be ignored and modules split across workers).
DEPS="numpy setuptools wheel ninja pytest<9.2 pytest-xdist scipy hypothesis tqdm gensim==4.4.0 matplotlib abi3audit"

cached() {
  local venv
  venv=$(ls -d "$CI_CACHE/torch-$CI_TORCH"-* 2>/dev/null | head -1 || true)
  if [ -z "$venv" ] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    local tmp="$CI_CACHE/creating-$CI_TORCH-$$"
    echo "torch_venv: creating the torch $CI_TORCH venv in $CI_CACHE" >&2
    mkdir -p "$CI_CACHE"
    "$PY" -m venv "$tmp"
    "$tmp/bin/python" -m pip install -q "torch==$CI_TORCH" $DEPS >&2
    local tag
    tag=$("$tmp/bin/python" -c "import torch; print('cu' + torch.version.cuda.replace('.', '') if torch.version.cuda else 'cpu')")
    venv="$CI_CACHE/torch-$CI_TORCH-$tag"
    # Built under a temporary name so that an interrupted install is never taken for the
    # cache. The scripts in bin/ keep that name in their first line: CI runs `python -m`.
    mv "$tmp" "$venv"
  fi
  # The cache may predate a dependency: add what is missing (a no-op when all are there).
  local stamp="$venv/.fastsoftmax-deps"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$DEPS" ]; then
    "$venv/bin/python" -m pip install -q $DEPS >&2
    echo "$DEPS" >"$stamp"
  fi
  echo "$venv"
}

throwaway() {
  local dir=$1 base
  base=$(cached)
  rm -rf "$dir"
  "$PY" -m venv "$dir"
  local site base_site
  site=$("$dir/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
  base_site=$("$base/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
  echo "$base_site" >"$site/_fastsoftmax_ci_base.pth"
  echo "$dir"
}

case "${1:-}" in
  cached) cached ;;
  throwaway) throwaway "${2:?throwaway DIR}" ;;
  *) echo "usage: $0 cached | throwaway DIR" >&2; exit 2 ;;
esac
