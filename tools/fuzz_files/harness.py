"""What every file fuzz target shares: the paths it imports from, the engine that drives it
and the checks of an exception a loader may raise.

A target script defines `one_input(data: bytes)` (raises AssertionError, or lets any other
exception through, when the code under test is wrong) and `seeds()` (the starting inputs),
and ends with `harness.main(one_input, seeds, INSTRUMENT)`. Run as a script it fuzzes with
atheris (libFuzzer's command line: `-runs=N DIR`, DIR the corpus, seeded on the first
run); `plain_fuzz` runs the same function over seeded random mutations of the seeds, in
process and without atheris, for the quick test under tests/ (make test needs no fuzzer).
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# tests/ holds the plain references (reference_word2vec.py) the targets compare against. The
# package itself comes from PYTHONPATH (the ASan copy under build/sanitize) or the tree.
for _p in (os.path.join(ROOT, "tests"), ROOT):
    if _p not in sys.path:
        sys.path.append(_p)



def scratch_file(name: str) -> str:
    """A path in a new directory, on tmpfs where there is one (a target writes a file per
    input), removed when Python exits (libFuzzer's own exit skips that: a few bytes)."""
    directory = tempfile.mkdtemp(prefix="fuzz-files-",
                                 dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    atexit.register(shutil.rmtree, directory, True)
    return os.path.join(directory, name)


def loader_error_ok(exc: BaseException, path: str) -> bool:
    """A hostile file may only raise a ValueError (or subclass) that names the file."""
    return isinstance(exc, ValueError) and path in str(exc)


def check_loader_error(exc: BaseException, path: str) -> None:
    if not loader_error_ok(exc, path):
        raise AssertionError(f"{type(exc).__name__} that is not a ValueError naming the "
                             f"file: {exc!r}"[:2000]) from exc


# ---------------------------------------------------------------------------------------
# the engine without atheris
# ---------------------------------------------------------------------------------------

# Bytes a mutation splices in: line and field separators, UTF-8 lead and continuation
# bytes, Unicode spaces, number syntax.
TOKENS = [b"\n", b" ", b"  ", b"\r", b"\t", b"\x00", b"\xc3", b"\xa9", b"\xe2\x80\xa8",
          b"\xc2\xa0", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xff", b"-", b"1e40", b"nan",
          b"-inf", b"0", b"9" * 13, b"w1", b"\x1c", b"\xe3\x80\x80"]


def mutate(rng: random.Random, data: bytes, pool: list) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        at = rng.randrange(len(b) + 1)
        if op == 0 and b:  # flip a bit
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # a random byte
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2:  # splice a token
            b[at:at] = rng.choice(TOKENS)
        elif op == 3 and b:  # delete a run
            del b[at:at + rng.randint(1, 8)]
        elif op == 4:  # splice a slice of another input
            other = rng.choice(pool)
            i = rng.randrange(len(other) + 1)
            b[at:at] = other[i:i + rng.randint(1, 16)]
        elif op == 5 and b:  # duplicate a run
            i = rng.randrange(len(b))
            b[at:at] = b[i:i + rng.randint(1, 16)]
    return bytes(b)


def plain_fuzz(one_input, seeds, runs: int, seed: int = 0):
    """Runs `one_input` on the seeds, then on random mutations of the seeds and of inputs
    seen so far, `runs` calls in all. Returns (runs done, the first failing input and its
    exception, or None)."""
    rng = random.Random(seed)
    pool = list(seeds) or [b""]
    for n in range(runs):
        data = pool[n] if n < len(pool) else mutate(rng, rng.choice(pool), pool)
        try:
            one_input(data)
        except Exception as exc:  # every exception that escapes a target is a finding
            return n + 1, (data, exc)
        if n >= len(seeds) and rng.random() < 0.05 and len(pool) < 512:
            pool.append(data)
    return runs, None


# ---------------------------------------------------------------------------------------
# the entry point of a target script
# ---------------------------------------------------------------------------------------


def write_seeds(directory: str, seeds) -> None:
    """Seeds a new corpus directory (an existing one keeps what earlier runs found)."""
    os.makedirs(directory, exist_ok=True)
    if not os.listdir(directory):
        for i, s in enumerate(seeds):
            with open(os.path.join(directory, f"seed-{i:03d}"), "wb") as f:
                f.write(s)


def limit_address_space() -> None:
    """Without ASan (whose shadow memory needs terabytes of address space) a file that makes
    a loader reserve gigabytes gets a MemoryError here, which the targets report: Linux would
    otherwise hand out untouched zero pages and the allocation would go unseen."""
    import resource
    with open("/proc/self/status") as f:
        size_kb = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    cap = (size_kb << 10) + (4 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))


def main(one_input, seeds, instrument) -> None:
    """`instrument()` imports the modules whose coverage guides the fuzzer (their lines and
    comparisons are traced); it runs inside atheris' import hook."""
    import atheris

    with atheris.instrument_imports(include=["fastsoftmax", "reference_word2vec"]):
        instrument()
    dirs = [a for a in sys.argv[1:] if not a.startswith("-")]
    if dirs:
        write_seeds(dirs[0], seeds())
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        limit_address_space()
    import fastsoftmax._C as ext
    print(f"Testing {ext.__file__}\nfuzzing from {time.time():.3f}", file=sys.stderr,
          flush=True)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
