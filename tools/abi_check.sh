#!/usr/bin/env bash
# The ABI gates of a fastsoftmax wheel (issue 23): one wheel for every torch >= 2.11 and
# Python >= 3.10 needs
#   1. no undefined C++ symbol of torch's unstable API in the extension (nm -D
#      --undefined-only, demangled: nothing in at::, c10::, torch::), only the stable C shim;
#   2. abi3audit clean: the extension uses no Python symbol outside the limited API of its
#      cp310-abi3 tag.
# Offending symbols are listed, then grouped by the object file that needs them when the
# build's objects are at hand (see objects_of).
#
#   tools/abi_check.sh dist/fastsoftmax-*.whl [more wheels]
# ABI3AUDIT (a command; default: abi3audit on PATH, else the CI torch venv's, tools/torch_venv.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 WHEEL..." >&2; exit 2; }
PATTERN=' (at|c10|torch)::'
# A wheel of dist-cuda/ (make cuda-wheel) was built in build/cuda-wheel, one of dist/ in
# build/temp.* (make build); OBJECTS overrides.
objects_of() {
  if [ -n "${OBJECTS:-}" ]; then echo "$OBJECTS"
  else case "$1" in dist-cuda/*) echo build/cuda-wheel ;; *) ls -d build/temp.* 2>/dev/null ;; esac
  fi
}
status=0
for wheel in "$@"; do
  echo "abi_check: $wheel"
  tmp=$(mktemp -d)
  python3 -m zipfile -e "$wheel" "$tmp" >/dev/null || { echo "abi_check: cannot unpack $wheel"; status=1; continue; }
  for so in $(find "$tmp" -name '*.so'); do
    name=${so#"$tmp"/}
    case "$name" in
      *.abi3.so) ;;
      *) echo "abi_check: FAIL $name is not an abi3 extension (setup.py's py_limited_api)"; status=1 ;;
    esac
    bad=$(nm -D --undefined-only "$so" | c++filt | grep -E "$PATTERN" | sed 's/^ *U //' | sort -u)
    if [ -z "$bad" ]; then
      echo "abi_check: ok $name needs no at::/c10::/torch:: C++ symbol"
      continue
    fi
    status=1
    echo "abi_check: FAIL $name needs $(echo "$bad" | wc -l) C++ symbols of torch's unstable ABI:"
    echo "$bad" | sed 's/^/    /' | head -${MAX_LIST:-40}
    [ "$(echo "$bad" | wc -l)" -le "${MAX_LIST:-40}" ] || echo "    ... (MAX_LIST=N lists more)"
    where=$(objects_of "$wheel")
    objects=$(find $where -name '*.o' 2>/dev/null | sort)
    [ -n "$objects" ] || continue
    echo "abi_check: needed by these objects (of $where):"
    for o in $objects; do
      n=$(nm -C --undefined-only "$o" | sed 's/^ *U //' | grep -E "^(at|c10|torch)::" | sort -u | grep -cxFf <(echo "$bad"))
      [ "$n" -gt 0 ] && echo "    $n  $o"
    done
  done
  rm -rf "$tmp"
  # The cached venv's bin/ scripts may name the directory it was created in: python -m.
  audit=${ABI3AUDIT:-$(command -v abi3audit || echo "$(tools/torch_venv.sh cached)/bin/python -m abi3audit")}
  if $audit --version >/dev/null 2>&1; then
    if $audit --strict --verbose --summary "$wheel"; then
      echo "abi_check: ok abi3audit $(basename "$wheel")"
    else
      echo "abi_check: FAIL abi3audit $(basename "$wheel")"; status=1
    fi
  else
    echo "abi_check: FAIL abi3audit not found (pip install abi3audit, or set ABI3AUDIT)"; status=1
  fi
done
exit $status
