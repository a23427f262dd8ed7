"""Row-sparse gradients, the language model's default where they are exact (issue 36, the GPU
training step): SGD with clipping trains the same parameters as with dense gradients for
every head that has sparse ones; sparse=None settles per optimiser and is saved with the run;
sparse with Adam warns; the clip's norm of an uncoalesced gradient equals the coalesced one."""

import pytest
import torch

from fastsoftmax.cli import lm as cli
from fastsoftmax.models import lm
from fastsoftmax.models.heads import has_sparse_gradient
from fastsoftmax.models.lm.training import resolve, sparse_default
from fastsoftmax.nn import HEADS
from fastsoftmax.optim import clip_grad_norm, sparse_grad_norm
from test_lm import one_thread, write_corpus  # noqa: F401 (one_thread: an autouse fixture)
from test_lm import small_model

SPARSE_HEADS = sorted(h for h in HEADS if has_sparse_gradient(h))


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), n_train=120, n_eval=20)


# ---------------------------------------------------------------------------------------
# The clip's norm of a sparse gradient
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, sparse_dims", [((50, 3), 1), ((6, 7), 2), ((9,), 1)])
def test_uncoalesced_norm_is_the_coalesced_norm(shape, sparse_dims):
    g = torch.Generator().manual_seed(3)
    nnz = 40  # many more entries than rows: most indices repeat
    indices = torch.stack([torch.randint(0, min(shape[d], 5), (nnz,), generator=g)
                           for d in range(sparse_dims)])
    values = torch.randn(nnz, *shape[sparse_dims:], dtype=torch.float64, generator=g)
    grad = torch.sparse_coo_tensor(indices, values, shape, check_invariants=True)
    assert not grad.is_coalesced()
    want = grad.coalesce()._values().norm()
    torch.testing.assert_close(sparse_grad_norm(grad, torch.float64), want, rtol=1e-14, atol=0)
    assert sparse_grad_norm(grad.coalesce(), torch.float64) == want


def test_clip_scales_an_uncoalesced_gradient_as_its_dense_twin():
    g = torch.Generator().manual_seed(4)
    indices = torch.randint(0, 6, (1, 30), generator=g)
    values = torch.randn(30, 4, dtype=torch.float64, generator=g)
    sparse, dense = (torch.nn.Parameter(torch.zeros(8, 4, dtype=torch.float64)) for _ in "ab")
    sparse.grad = torch.sparse_coo_tensor(indices, values, (8, 4), check_invariants=True)
    dense.grad = sparse.grad.to_dense()
    norms = [clip_grad_norm([p], 0.5) for p in (sparse, dense)]
    torch.testing.assert_close(norms[0], norms[1], rtol=1e-14, atol=0)
    torch.testing.assert_close(sparse.grad.to_dense(), dense.grad, rtol=1e-14, atol=0)


# ---------------------------------------------------------------------------------------
# Sparse SGD is dense SGD
# ---------------------------------------------------------------------------------------
def _trained(vocab, data, head: str, sparse: bool, **kw) -> dict:
    torch.manual_seed(5)
    model = small_model(vocab, output=head, sparse=sparse, **kw).double()
    opt = lm.make_optimizer(model, "sgd", 0.5)
    lm.train_epoch(model, data, opt, bptt=6, clip=0.05, max_steps=4)  # every step clipped
    assert model.embedding.weight.grad.is_sparse == sparse
    if not kw.get("tie_weights"):
        assert model.head.linear_weight.grad.is_sparse == sparse
    return model.state_dict()


@pytest.mark.parametrize("head, tied", [(h, False) for h in SPARSE_HEADS] + [("sampled", True)])
def test_sparse_sgd_trains_the_dense_parameters(corpus_dir, head, tied):
    corpus = lm.Corpus(corpus_dir)
    data = lm.batchify(corpus["train"], 4)
    kw = dict(tie_weights=True) if tied else {}
    dense, sparse = (_trained(corpus.vocab, data, head, s, **kw) for s in (False, True))
    for key in dense:
        torch.testing.assert_close(sparse[key], dense[key], rtol=1e-12, atol=1e-14, msg=key)


# ---------------------------------------------------------------------------------------
# sparse=None: the default per optimiser, saved with the run
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("output", sorted(HEADS))
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_auto_is_sparse_exactly_where_it_is_exact(output, optimizer, corpus_dir, tmp_path,
                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = resolve(lm.TrainConfig(data=corpus_dir, output=output, optimizer=optimizer), None)
    assert config.sparse is (optimizer == "sgd" and output in SPARSE_HEADS)


def test_auto_is_dense_across_processes(monkeypatch):
    config = lm.TrainConfig(output="sampled")
    assert sparse_default(config)
    assert not sparse_default(lm.TrainConfig(output="sampled", vocab_parallel=2))
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert not sparse_default(config)


def test_an_explicit_choice_stands(corpus_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = resolve(lm.TrainConfig(data=corpus_dir, output="sampled", sparse=False), None)
    assert config.sparse is False
    config = resolve(lm.TrainConfig(data=corpus_dir, output="full", sparse=True), None)
    assert config.sparse is True  # the embedding's gradient alone
    with pytest.warns(UserWarning, match="SparseAdam.*differs from dense Adam"):
        config = resolve(lm.TrainConfig(data=corpus_dir, output="sampled", sparse=True,
                                        optimizer="adam"), None)
    assert config.sparse is True


def _train(corpus_dir, path, *extra):
    return cli.main(["train", "--data", corpus_dir, "--embed-dim", "8", "--hidden-size", "8",
                     "--batch-size", "4", "--bptt", "8", "--epochs", "1", "--lr", "2",
                     "--output", "sampled", "--num-sampled", "6", "--no-progress",
                     "--checkpoint", path, *extra])


def test_the_command_line_default_and_its_flags(corpus_dir, tmp_path):
    for flag, want in (((), True), (("--no-sparse",), False)):
        path = str(tmp_path / f"run{want}.pt")
        assert _train(corpus_dir, path, *flag) == 0
        saved = lm.load_checkpoint(path)
        assert saved["train_config"]["sparse"] is want
        assert saved["model_config"]["sparse"] is want
        model, _ = lm.model_from_checkpoint(saved)
        assert model.embedding.sparse is want and model.head.sparse is want


def test_a_run_resumes_with_the_layout_it_was_saved_with(corpus_dir, tmp_path):
    """The settled value is saved: a resumed run keeps it, a dense checkpoint (as every one
    written before sparse became the default) resumes dense, and a flag against it is
    refused by name."""
    for flag, want in (((), True), (("--no-sparse",), False)):
        path = str(tmp_path / f"resume{want}.pt")
        assert _train(corpus_dir, path, *flag) == 0
        assert cli.main(["train", "--data", corpus_dir, "--resume", path, "--epochs", "2",
                         "--no-progress"]) == 0
        saved = lm.load_checkpoint(path)
        assert saved["epoch"] == 2 and saved["train_config"]["sparse"] is want
    opposite = ["--sparse" if not want else "--no-sparse"]
    with pytest.raises(ValueError, match="sparse"):
        resolve(lm.TrainConfig(data=corpus_dir, resume=path, sparse=not want),
                lm.load_checkpoint(path), given={"sparse"})
    assert cli.main(["train", "--data", corpus_dir, "--resume", path, "--epochs", "3",
                     "--no-progress", *opposite]) == 2
