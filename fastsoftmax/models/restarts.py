"""Restarts: train one configuration from seeds seed, seed + 1, ... and keep the run of lowest
validation error, as the MemN2N paper reports its figures (a task that is all or nothing
across seeds reaches its figure only in some runs).

Every restart is a whole run of the model's fit with its own seed (a run drawing generated
data draws it from that seed too, so that the kept checkpoint evaluates and resumes as any
other). The run kept is the one whose last validation row has the lowest error: the
Recipe's Measure says which history entry that is and which way it goes (an accuracy in %,
whose error is 100 - it, or a perplexity, lower the better as it is); a run with no
validation score ranks last and, on a tie, the earlier seed is kept. Its checkpoint (and
plot, for a model that draws one) ends at the paths the configuration names, recording the
restarts; the other runs' files are removed.
"""

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Callable, List, Optional

from . import checkpoints
from .checkpoints import refuse_overwrite

# The configuration's fields naming a file a run writes, each restart writing its own.
OUTPUTS = ("checkpoint", "plot")


@dataclass(frozen=True)
class Measure:
    """The score restarts rank runs by: `valid`, the history rows' key of its validation
    figure, `test`, the test result's key of the same figure (None: the model has no test
    set), and whether it is an accuracy in % (ranked by its error, 100 - it: the rows and log
    lines say 'error') or a figure lower the better as it is, called `name` there (a
    perplexity: 'ppl')."""

    valid: str
    test: Optional[str]
    accuracy: bool = True
    name: str = "error"

    def error(self, value: float) -> float:
        """The lower-is-better figure of a score `value`."""
        return 100.0 - value if self.accuracy else value

    def describe(self, value: float) -> str:
        return f"{value:.2f}%" if self.accuracy else f"{value:.2f}"


ACCURACY = Measure("valid_accuracy", "accuracy")
PERPLEXITY = Measure("val_ppl", "ppl", accuracy=False, name="ppl")


def validation_error(history: List[dict], measure: Measure = ACCURACY) -> float:
    """The lower-is-better figure of the last history row that has `measure`'s validation
    score (100 - an accuracy, a perplexity as it is); math.inf when none has a number."""
    key = measure.valid
    scores = [row[key] for row in history if isinstance(row.get(key), (int, float))]
    if not scores or math.isnan(scores[-1]):
        return math.inf
    return measure.error(scores[-1])


def seeded_path(path: str, seed: int) -> str:
    """`path` with .seed<seed> before its extension: the file of one restart."""
    stem, ext = os.path.splitext(path)
    return f"{stem}.seed{seed}{ext}"


def check_restarts(config) -> None:
    """Refuse, before anything is read or written, what several restarts cannot do."""
    if config.resume is not None:
        raise ValueError(f"restarts {config.restarts} trains new runs and resume continues "
                         f"one ({config.resume}): give one or the other")
    if getattr(config, "valid_fraction", None) == 0:
        raise ValueError("restarts keep the run of lowest validation error: valid_fraction "
                         "must be above 0")
    for field in OUTPUTS:
        path = getattr(config, field, None)
        if path is None:
            continue
        for target in [path] + [seeded_path(path, seed) for seed in seeds(config)]:
            refuse_overwrite(target, field, checkpoints.flag(field), config.force)


def seeds(config) -> range:
    return range(config.seed, config.seed + config.restarts)


def fit_restarts(recipe, fit: Callable, config, report: Callable, **options) -> dict:
    """Run fit(one restart's configuration, **options) for every seed of config.restarts
    (`recipe`: the model's skeleton.Recipe), `report` receiving a line per run and one naming
    the run kept; return the kept run's result, its configuration
    naming the restart count, with `restarts` (one row per run: seed, valid_<name> and, when
    the run has a test score, test_<name>, `name` being the Recipe's Measure's: 'error' of
    an accuracy in %, 'ppl')."""
    check_restarts(config)
    measure, runs = recipe.validation, []
    valid, test = f"valid_{measure.name}", f"test_{measure.name}"
    for number, seed in enumerate(seeds(config), 1):
        outputs = {f: seeded_path(getattr(config, f), seed) for f in OUTPUTS
                   if getattr(config, f, None) is not None}
        result = fit(dataclasses.replace(config, seed=seed, restarts=1, **outputs), **options)
        row = {"seed": seed, valid: validation_error(result["history"], measure),
               **_test_score(result.get("test"), measure, test)}
        report(f"restart {number}/{config.restarts} (seed {seed}): "
               + _describe(row, measure, valid, test))
        runs.append((row, result))
    kept = min(range(len(runs)), key=lambda i: runs[i][0][valid])
    row, result = runs[kept]
    final = _keep_files(config, result["config"], [r["config"] for _, r in runs], kept)
    _record(recipe.kind, final["checkpoint"], [r for r, _ in runs], row["seed"])
    report(f"kept restart {kept + 1} of {config.restarts} (seed {row['seed']}, lowest "
           f"validation {measure.name}): {final['checkpoint']}")
    run_config = dataclasses.replace(result["config"], restarts=config.restarts, **final)
    return dict(result, config=run_config, checkpoint=final["checkpoint"],
                restarts=[r for r, _ in runs])


def _test_score(test: Optional[dict], measure: Measure, key: str) -> dict:
    """{key: the lower-is-better test figure} when the run's test result has one, else {}."""
    if measure.test is None or not isinstance(test, dict):
        return {}
    if isinstance(test.get(measure.test), (int, float)):
        return {key: measure.error(test[measure.test])}
    return {}


def _describe(row: dict, measure: Measure, valid: str, test: str) -> str:
    if math.isinf(row[valid]):
        return "no validation score"
    return (f"validation {measure.name} {measure.describe(row[valid])}"
            + (f", test {measure.name} {measure.describe(row[test])}" if test in row else ""))


def _keep_files(config, kept_config, configs: list, kept: int) -> dict:
    """Move the kept run's files to the paths `config` names (its own where none is named)
    and remove the other runs'; returns {field: the kept file}."""
    final = {}
    for field in OUTPUTS:
        if not hasattr(config, field):
            continue
        wanted = getattr(config, field)
        source = getattr(kept_config, field)
        if wanted is not None and source is not None and os.path.exists(source):
            os.replace(source, wanted)
        final[field] = wanted if wanted is not None else source
        for i, other in enumerate(configs):
            path = getattr(other, field)
            if i != kept and path is not None and os.path.exists(path):
                os.remove(path)
    return final


def _record(kind: str, path: str, rows: list, seed: int) -> None:
    """Write the restarts into the kept checkpoint: its train_config names their count (its
    seed is the kept run's) and `restarts` holds every run's row."""
    state = checkpoints.load_checkpoint(path, kind)
    state["train_config"] = dict(state["train_config"], restarts=len(rows), checkpoint=path)
    state["restarts"] = dict(count=len(rows), kept_seed=seed, runs=rows)
    checkpoints.save_checkpoint(path, kind, state)
