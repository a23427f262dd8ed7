"""bench/bench_hf_pretrain.py's parts on a tiny vocabulary: the validation perplexity it
reports is the exact one (against a float64 cross entropy of the unpatched model's logits),
training runs the steps asked with either loss from the same initial weights, and its
command line refuses bad input with a sentence."""

import math
import os
import sys

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))
import bench_hf_pretrain as bench  # noqa: E402

V = 50


def _ids(n, seed=0):
    return torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(seed))


def test_validation_ppl_is_the_exact_perplexity_of_whole_windows():
    model = bench.build_model(V, seed=0)
    reference = bench.build_model(V, seed=0).double().eval()  # the same weights, unpatched
    bench.patch_head(model, "exact", None, seed=0)
    ids = _ids(3 * bench.SEQ + 10)  # three whole windows and a tail left out
    ppl, scored = bench.validation_ppl(model, ids)
    inputs = ids[:3 * bench.SEQ].view(3, bench.SEQ)
    targets = ids[1:3 * bench.SEQ + 1].view(3, bench.SEQ)
    with torch.no_grad():
        logits = reference(input_ids=inputs).logits
    expected = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)).exp().item()
    assert scored == 3 * bench.SEQ
    assert math.isclose(ppl, expected, rel_tol=1e-5)


@pytest.mark.parametrize("head", ["exact", "8"])
def test_train_runs_the_steps_asked_from_the_seed_weights(head):
    stream = _ids(4 * (2 * bench.SEQ + 1)).view(4, -1)
    model = bench.build_model(V, seed=3)
    start = model.lm_head.weight.detach().clone()
    assert torch.equal(start, bench.build_model(V, seed=3).lm_head.weight)
    bench.patch_head(model, head, torch.arange(V, 0, -1).double(), seed=3)
    steps, seconds, step_s, wall_s, loss = bench.train(model, stream, steps=3)
    assert steps == 3 and 0 < step_s <= seconds and wall_s > 0 and math.isfinite(loss)
    assert not torch.equal(model.lm_head.weight, start)


def test_learning_rate_warms_up_then_decays_to_zero_over_the_budget():
    assert bench.learning_rate(0, 0.0) == pytest.approx(bench.LR / bench.WARMUP)
    assert bench.learning_rate(bench.WARMUP, 0.0) == pytest.approx(bench.LR)
    assert bench.learning_rate(10 * bench.WARMUP, 0.5) == pytest.approx(bench.LR / 2)
    assert bench.learning_rate(10 * bench.WARMUP, 1.2) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("argv, message", [
    (["equal-time", "--heads", "0"], "a head is 'exact' or a number of sampled classes"),
    (["equal-time", "--heads", "40000"], "below V = 33,278"),
    (["num-sampled", "--steps", "0"], "--steps must be positive"),
    (["equal-time", "--valid-tokens", "64"], "--valid-tokens must exceed one window"),
    (["equal-time", "--data", "/nonexistent"], "no WikiText-2 folder at /nonexistent"),
    (["equal-time", "--epochs", "2"], "unrecognized arguments: --epochs"),
])
def test_command_line_refuses_bad_input_with_a_sentence(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.parse_args(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
