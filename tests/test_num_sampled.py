"""One name for the sample count, num_sampled: make_head takes it for every head (and refuses
the old num_samples= with a sentence), each layer checks its own count once, the
vocabulary-parallel layers take their single-process twin's name, and a language-model
checkpoint written in the one format there has been (version 1, whose model_config has
always said num_sampled) still loads."""

import os
import tempfile

import pytest
import torch
import torch.distributed as dist

import fastsoftmax as fs
import fastsoftmax.vocab_parallel as vp
from fastsoftmax.nn import HEADS, make_head

D, V = 6, 30
COUNTS = torch.arange(V, 0, -1).double()


# -- make_head ----------------------------------------------------------------------------

def test_make_head_takes_num_sampled():
    head = make_head("sampled", 64, 1000, num_sampled=32)
    assert isinstance(head, fs.SampledSoftmaxLoss) and head.num_sampled == 32
    assert make_head("nce", D, V, num_sampled=4).num_sampled == 4
    # 'neg' gets it under its layer's own name, as word2vec's K
    assert make_head("neg", D, V, num_sampled=4).num_negatives == 4
    for name in ("margin_ranking", "warp"):
        assert make_head(name, D, V, num_sampled=4).num_sampled == 4


def test_make_head_refuses_the_old_name():
    with pytest.raises(TypeError, match="num_samples= was renamed: use num_sampled="):
        make_head("sampled", 64, 1000, num_samples=32)
    with pytest.raises(TypeError, match="use num_sampled="):  # for a head that draws none too
        make_head("full", 64, 1000, num_samples=32)


def test_every_sampling_head_needs_a_count():
    for name, cls in HEADS.items():
        if getattr(cls, "num_samples_arg", None) is not None:
            with pytest.raises(ValueError, match=r"needs a sample count \(num_sampled\)"):
                make_head(name, D, V)


def test_the_layer_checks_its_count():
    # make_head hands the count on; the layer says what is wrong with it, once.
    with pytest.raises(ValueError, match=r"num_sampled \(30\) must be smaller than num_classes"):
        make_head("sampled", D, V, num_sampled=V)
    with pytest.raises((TypeError, ValueError), match="num_sampled"):
        make_head("nce", D, V, num_sampled=0)
    # Negative sampling draws with replacement: its layer takes K >= V, and so does make_head.
    assert make_head("neg", D, V, num_sampled=V + 5).num_negatives == V + 5


# -- the vocabulary-parallel layers ----------------------------------------------------------

@pytest.fixture
def one_rank_group():
    """A gloo group of one process (this one): enough to build the layers."""
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed has no gloo backend here")
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method="file://" + os.path.join(folder, "store"),
                                rank=0, world_size=1)
        try:
            yield
        finally:
            dist.destroy_process_group()


def test_vocab_parallel_layers_take_their_twin_s_name(one_rank_group):
    sampler = fs.UniformSampler(V)
    sampled = vp.VocabParallelSampledSoftmaxLoss(D, V, num_sampled=5, sampler=sampler)
    nce = vp.VocabParallelNCELoss(D, V, num_sampled=5, sampler=sampler)
    neg = vp.VocabParallelNegativeSamplingLoss(D, V, num_negatives=V + 5, sampler=sampler)
    assert (sampled.num_sampled, nce.num_sampled, neg.num_negatives) == (5, 5, V + 5)
    x, t = torch.randn(4, D), torch.randint(0, V, (4,))
    for layer in (sampled, nce, neg):
        assert torch.isfinite(layer(x, t))
    with pytest.raises(TypeError, match="num_sampled"):  # the old keyword
        vp.VocabParallelSampledSoftmaxLoss(D, V, num_samples=5, sampler=sampler)
    # Each layer checks its own count: distinct candidates cannot be all the classes.
    with pytest.raises(ValueError, match=r"num_sampled \(30\) must be smaller than num_classes"):
        vp.VocabParallelNCELoss(D, V, V, sampler=sampler)
    with pytest.raises((TypeError, ValueError), match="num_negatives"):
        vp.VocabParallelNegativeSamplingLoss(D, V, 0, sampler=sampler)


def test_shard_layer_keeps_the_count(one_rank_group):
    shard = vp.shard_layer
    assert shard(fs.SampledSoftmaxLoss(D, V, 7)).num_sampled == 7
    assert shard(fs.NCELoss(D, V, 7)).num_sampled == 7
    assert shard(fs.NegativeSamplingLoss(D, V, 7)).num_negatives == 7


# -- checkpoints --------------------------------------------------------------------------

def test_a_checkpoint_written_by_hand_in_version_1_loads(tmp_path):
    """The dict save_checkpoint has written since version 1, spelled out: the model's
    configuration (num_sampled, the name models have always saved) beside its weights."""
    from fastsoftmax.models import lm
    from fastsoftmax.models.vocabulary import Vocabulary

    words = ["<unk>"] + [f"w{i}" for i in range(V - 1)]
    vocab = Vocabulary(words, COUNTS.long())
    config = dict(vocab_size=V, embed_dim=8, hidden_size=8, num_layers=1, rnn_type="lstm",
                  dropout=0.0, tie_weights=False, projection=False, output="sampled",
                  num_sampled=5, sampler="unigram", power=0.75, init_range=0.1, sparse=False)
    weights = lm.RNNLanguageModel(counts=vocab.counts, **config).state_dict()
    path = tmp_path / "v1.pt"
    torch.save(dict(format="fastsoftmax-checkpoint", kind="lm", version=1,
                    model_config=config, model=weights, vocab=vocab.state_dict(),
                    optimizer=None, schedule=None, epoch=1, history=[], train_config={},
                    position=None), path)
    model, loaded_vocab = lm.model_from_checkpoint(lm.load_checkpoint(str(path)))
    assert model.head.num_sampled == 5 and model.config["num_sampled"] == 5
    assert loaded_vocab.itos == words
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, weights[name]), name
