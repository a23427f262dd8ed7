"""The LM's training step under torch.compile (fastsoftmax-lm train --compile): every head
traces as one graph (fullgraph=True: a graph break is an error), forward and backward, and
computes what the eager step computes."""

import pytest
import torch

from fastsoftmax.models.lm.model import CompiledStep, RNNLanguageModel
from fastsoftmax.nn import HEADS

V = 40


def model_for(head: str) -> RNNLanguageModel:
    torch.manual_seed(0)
    return RNNLanguageModel(V, embed_dim=8, hidden_size=8, num_layers=2, output=head,
                            num_sampled=8, counts=torch.arange(1.0, V + 1))


def two_steps(run, model, batches, seed=3):
    """Loss and gradients of two steps, the hidden state carried (detached) between them."""
    torch.manual_seed(seed)
    out, hidden = [], None
    for x in batches:
        model.zero_grad(set_to_none=True)
        loss, hidden = run(x[:, :-1], x[:, 1:], hidden)
        loss.backward()
        hidden = tuple(h.detach() for h in hidden)
        out.append((loss.detach(), [p.grad.to_dense().clone() for p in model.parameters()
                                    if p.grad is not None]))
    return out


@pytest.mark.parametrize("head", sorted(HEADS))
def test_every_head_compiles_as_one_graph_and_matches_eager(head):
    batches = list(torch.randint(0, V, (2, 4, 6), generator=torch.Generator().manual_seed(1)))
    model = model_for(head)
    eager = two_steps(model, model, batches)
    torch._dynamo.reset()
    step = CompiledStep(model, "default")
    step.compiled = torch.compile(model, fullgraph=True, backend="aot_eager")  # CPU-quick
    compiled = two_steps(step, model, batches)
    for (loss_e, grads_e), (loss_c, grads_c) in zip(eager, compiled):
        torch.testing.assert_close(loss_c, loss_e, rtol=1e-5, atol=1e-6)
        assert len(grads_c) == len(grads_e)
        for g_c, g_e in zip(grads_c, grads_e):
            torch.testing.assert_close(g_c, g_e, rtol=1e-4, atol=1e-6)


def test_the_command_line_trains_with_compile(tmp_path, monkeypatch, capsys):
    from fastsoftmax.cli import lm
    from test_lm import write_corpus

    modes = []
    real = torch.compile

    def quick(model, mode=None, **kw):  # aot_eager: the same graph, without inductor's build
        modes.append((mode, kw.get("fullgraph")))
        return real(model, backend="aot_eager", **kw)

    monkeypatch.setattr(torch, "compile", quick)
    torch._dynamo.reset()
    data = write_corpus(tmp_path / "corpus")
    argv = ["train", "--data", str(data), "--output", "sampled", "--epochs", "1",
            "--embed-dim", "8", "--hidden-size", "8", "--num-sampled", "4", "--bptt", "5",
            "--batch-size", "4", "--checkpoint", str(tmp_path / "run.pt"), "--compile",
            "reduce-overhead"]
    assert lm.main(argv) == 0
    assert modes == [("reduce-overhead", True)]
    assert "test ppl" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        lm.main(argv[:-1] + ["fastest"])
    assert "invalid choice: 'fastest'" in capsys.readouterr().err


def test_compile_with_vocab_parallel_is_refused():
    from fastsoftmax.models.lm.training import TrainConfig, check_options

    with pytest.raises(ValueError, match="--compile does not go with --vocab-parallel"):
        check_options(TrainConfig(data="x", compile="default", vocab_parallel=2))
    with pytest.raises(ValueError, match="compile must be one of"):
        check_options(TrainConfig(data="x", compile="fast"))


def test_compiled_cuda_sampler_without_generator_draws_its_seed_on_the_device():
    """A CPU draw copied to the GPU would keep a compiled step out of CUDA graphs; eager steps
    and explicit generators keep the CPU draw (the same ids on CPU and CUDA)."""
    from fastsoftmax.ops.sampling import seed_device

    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert seed_device(None, cuda, compiling=True) == cuda
    assert seed_device(None, cuda, compiling=False) == cpu
    assert seed_device(torch.Generator(), cuda, compiling=True) == cpu
    assert seed_device(None, cpu, compiling=True) == cpu
