"""One checkpoint format for every model: a dict saved by torch.save with a format name, a
kind tag ('lm', 'seq2seq', ...) and a version, written atomically and refused with one
sentence naming the file when it is of another kind, truncated or not a checkpoint.

A checkpoint file is a pickle, and unpickling can run any code the file names. Checkpoints
hold only tensors, numbers, strings, None and plain containers (dict, list, tuple), so they
are loaded with torch.load(weights_only=True), whose unpickler builds nothing else: a file
naming any other Python object is refused unread, with a ValueError naming the file."""

import dataclasses
import os
import random
import re
import time
from typing import Optional

import torch

from ..atomic import atomic_path, check_writable

FORMAT = "fastsoftmax-checkpoint"
VERSION = 1
KIND_NAMES = {"lm": "language-model", "seq2seq": "seq2seq", "memn2n": "memory-network",
              "memnn": "supervised memory-network",
              "dmn": "dynamic-memory-network"}


def save_checkpoint(path: str, kind: str, state: dict) -> str:
    """Write `state` with the format, kind and version tags; a crash never leaves half a file
    at `path` (fastsoftmax.atomic: temporary file, fsync, rename)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with atomic_path(path) as tmp:
        torch.save(dict(state, format=FORMAT, kind=kind, version=VERSION), tmp)
    return path


def rng_state() -> dict:
    """Every random stream training draws from: torch's CPU generator (dropout on CPU and the
    samplers' Philox seeds), CUDA's, Python's."""
    state = dict(torch=torch.get_rng_state(), python=random.getstate())
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def load_checkpoint(path: str, kind: str, map_location="cpu") -> dict:
    """The state saved by save_checkpoint(path, kind, ...), or a ValueError that names the
    file and what is wrong with it."""
    name = KIND_NAMES.get(kind, kind)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such checkpoint: {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged file
        # The weights-only unpickler refused a global: a class or function the file names
        # (any other refusal, such as an unknown opcode, is a file that is not a pickle).
        named = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
        if named:
            what = named.group(1)
            raise ValueError(
                f"{path} is refused: it holds a Python object no fastsoftmax checkpoint holds "
                f"({what}), and loading it could run code"
            ) from None
        # Not the weights-only unpickler's first line, which advises weights_only=False.
        detail = re.search(r"WeightsUnpickler error:\s*([^\n]+)", str(exc))
        reason = (detail.group(1) if detail else
                  str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise ValueError(
            f"{path} is not a fastsoftmax {name} checkpoint: it cannot be read (truncated or "
            f"not written by torch.save: {reason})"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{path} is not a fastsoftmax {name} checkpoint")
    if state.get("kind") != kind:
        other = KIND_NAMES.get(state.get("kind"), state.get("kind"))
        raise ValueError(f"{path} is not a fastsoftmax {name} checkpoint: it holds a {other} model")
    if not isinstance(state.get("version"), int) or state["version"] > VERSION:
        raise ValueError(
            f"{path} has checkpoint version {state.get('version')!r}; this fastsoftmax reads "
            f"versions up to {VERSION}"
        )
    return state


# ---------------------------------------------------------------------------------------
# Rules every training command shares: resuming, where to save, never overwriting.
# ---------------------------------------------------------------------------------------
def changed_from_defaults(config) -> set:
    """The fields of a training-config dataclass that differ from its defaults: the options a
    caller gave, which resume_values checks against the checkpoint's."""
    default = type(config)()
    return {f.name for f in dataclasses.fields(config)
            if getattr(config, f.name) != getattr(default, f.name)}


def flag(name: str) -> str:
    """The command-line spelling of an option name."""
    return "--" + name.replace("_", "-")


def resume_values(values: dict, given, saved: dict, *, resume: str, may_change,
                  run_options) -> dict:
    """The options of a resumed run: the checkpoint's `saved` ones, except run_options (this
    invocation's own) and the `given` ones listed in may_change. A given option outside both
    that differs from the checkpoint is refused, naming its flag."""
    conflicts = [
        f"{flag(k)} {values[k]} (the checkpoint has {saved[k]})"
        for k in sorted(given)
        if k not in tuple(run_options) + tuple(may_change) and k in saved and values[k] != saved[k]
    ]
    if conflicts:
        raise ValueError(
            f"cannot resume {resume} with {', '.join(conflicts)}: these options define the model "
            f"and its training; only {', '.join(flag(k) for k in may_change)} may change on resume"
        )
    out = dict(values)
    for k, v in saved.items():
        if k in out and k not in run_options and not (k in may_change and k in given):
            out[k] = v
    return out


def run_values(config, state: Optional[dict], given, *, may_change, run_options,
               added: Optional[dict] = None) -> dict:
    """The options of a run as a dict: `config`'s, or on resume (`state`, the loaded
    checkpoint) the checkpoint's with the `given` ones (default: those differing from the
    defaults) settled by resume_values, the checkpoint path defaulting to the resumed file.
    `added`: options newer than some checkpoints, with the value those were trained with."""
    given = set(changed_from_defaults(config) if given is None else given)
    values = config.to_dict()
    if state is not None:
        saved = dict(added or {}, **dict(state.get("train_config") or {}))
        values = resume_values(values, given, saved, resume=config.resume,
                               may_change=may_change, run_options=run_options)
        if values["checkpoint"] is None:
            values["checkpoint"] = config.resume
    return values


def claim_files(values: dict, kind: str, config) -> None:
    """Fill in the run's checkpoint path (a new file here by default) and refuse, before any
    training, to overwrite an existing checkpoint or plot that is not the resumed file."""
    if values["checkpoint"] is None:
        values["checkpoint"] = default_path(kind, values["output"])
    refuse_overwrite(values["checkpoint"], "checkpoint", "--checkpoint", config.force,
                     config.resume)
    refuse_overwrite(values.get("plot"), "plot", "--plot", config.force)


def default_path(kind: str, output: str) -> str:
    """A new checkpoint file in the working directory: <kind>-<output>-<time>[-n].pt."""
    stem = os.path.abspath(f"{kind}-{output}-{time.strftime('%Y%m%d-%H%M%S')}")
    path, n = f"{stem}.pt", 1
    while os.path.exists(path):
        n += 1
        path = f"{stem}-{n}.pt"
    return path


def refuse_overwrite(path: str, what: str, option: str, force: bool,
                     resume: Optional[str] = None) -> None:
    """ValueError if `path` exists (and is not the file being resumed) and not `force`, or if
    it cannot be written (said now, not after training)."""
    if not path:
        return
    check_writable(path, what)
    if not os.path.exists(path) or force:
        return
    if resume is not None and os.path.exists(resume) and os.path.samefile(path, resume):
        return
    hint = "resume it with --resume, " if what == "checkpoint" else ""
    raise ValueError(f"{what} {path} already exists; {hint}choose another {option}, or pass "
                     f"--force to overwrite it")
