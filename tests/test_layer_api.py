"""The output layers as a PyTorch user meets them: linear_cross_entropy's names, old state dicts
migrated, device=/dtype= factory arguments, generator= in forward, every constructor
parameter documented, and counts in the forms users have."""

import collections
import inspect

import numpy as np
import pytest
import torch
from conftest import requires_cuda

import fastsoftmax as fs
from fastsoftmax.models.lm.model import RNNLanguageModel
from fastsoftmax.nn import HEADS, make_head

D, V = 6, 30
COUNTS = torch.arange(V, 0, -1).double()
LAYERS = {
    "full": lambda **kw: fs.FullSoftmaxLoss(D, V, **kw),
    "sampled": lambda **kw: fs.SampledSoftmaxLoss(D, V, 5, **kw),
    "nce": lambda **kw: fs.NCELoss(D, V, 5, learn_log_z=True, **kw),
    "neg": lambda **kw: fs.NegativeSamplingLoss(D, V, 5, **kw),
    "neg_shared": lambda **kw: fs.NegativeSamplingLoss(D, V, 5, shared=True, **kw),
    "hs": lambda **kw: fs.HierarchicalSoftmaxLoss(D, V, COUNTS, **kw),
}
SAMPLING = ["sampled", "nce", "neg", "neg_shared"]


def batch(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(8, D, generator=g, dtype=dtype), torch.randint(0, V, (8,), generator=g)


def test_names_follow_linear_cross_entropy():
    for name in ("full", "sampled", "nce"):
        layer = LAYERS[name](bias=True)
        assert layer.linear_weight.shape == (V, D) and layer.linear_bias.shape == (V,)
        assert layer.linear_weight is layer.linear.weight
        assert layer.weight is None and "weight" not in dict(layer.named_parameters())
    assert LAYERS["neg"]().linear_bias is None
    assert LAYERS["hs"]().linear_weight.shape == (V - 1, D)
    # the functional forms take the same keywords as F.linear_cross_entropy
    for fn in (fs.functional.full_softmax_loss, fs.functional.sampled_softmax_loss):
        params = inspect.signature(fn).parameters
        assert list(params)[:3] == ["input", "linear_weight", "target"]
        for keyword in ("linear_bias", "weight", "label_smoothing", "reduction", "ignore_index"):
            assert params[keyword].kind is inspect.Parameter.KEYWORD_ONLY


OLD_NAMES = {  # before 0.1, and from 0.1 until the layers held an nn.Linear
    "0.0": {"linear.weight": "weight", "linear.bias": "bias", "linear_weight": "weight"},
    "0.1": {"linear.weight": "linear_weight", "linear.bias": "linear_bias"},
}


@pytest.mark.parametrize("version", sorted(OLD_NAMES))
@pytest.mark.parametrize("name", list(LAYERS))
def test_old_state_dict_keys_are_migrated(name, version):
    bias = {} if name in ("neg", "neg_shared", "hs") else {"bias": True}
    layer = LAYERS[name](**bias)
    torch.nn.init.normal_(layer.linear_weight)
    if layer.linear_bias is not None:
        torch.nn.init.normal_(layer.linear_bias)
    renames = OLD_NAMES[version]
    old = {renames.get(k, k): v for k, v in layer.state_dict().items()}
    if version == "0.0" or name == "hs":
        assert "weight" in old or "linear_weight" in old
    fresh = LAYERS[name](**bias)
    fresh.load_state_dict(old)  # strict: no missing or unexpected key
    assert torch.equal(fresh.linear_weight, layer.linear_weight)
    if layer.linear_bias is not None:
        assert torch.equal(fresh.linear_bias, layer.linear_bias)


def test_old_language_model_checkpoint_loads():
    model = RNNLanguageModel(V, 8, 8, 1, output="sampled", num_sampled=4, counts=COUNTS)
    old = {k.replace("head.linear.", "head."): v for k, v in model.state_dict().items()}
    assert "head.weight" in old and "head.bias" in old
    again = RNNLanguageModel(V, 8, 8, 1, output="sampled", num_sampled=4, counts=COUNTS)
    again.load_state_dict(old)
    assert torch.equal(again.head.linear_weight, model.head.linear_weight)
    tied = RNNLanguageModel(V, 8, 8, 1, output="sampled", num_sampled=4, counts=COUNTS,
                            tie_weights=True)
    assert tied.head.linear_weight is tied.embedding.weight


def test_class_weight_is_a_buffer_that_moves_and_saves():
    layer = fs.SampledSoftmaxLoss(D, V, 5, weight=torch.linspace(0.5, 2, V))
    assert "weight" in layer.state_dict() and "weight" not in dict(layer.named_parameters())
    assert layer.double().weight.dtype == torch.float64


@pytest.mark.parametrize("name", list(LAYERS))
def test_dtype_factory_argument(name):
    layer = LAYERS[name](dtype=torch.float64, device="cpu")
    assert all(p.dtype == torch.float64 for p in layer.parameters())
    x, t = batch(dtype=torch.float64)
    loss = layer(x, t)
    assert loss.dtype == torch.float64
    loss.backward()
    assert layer.linear_weight.grad.dtype == torch.float64
    layer.eval()
    assert layer(x, t).dtype == torch.float64


@requires_cuda
@pytest.mark.parametrize("name", list(LAYERS))
def test_device_factory_argument(name):
    layer = LAYERS[name](device="cuda")
    assert all(p.is_cuda for p in layer.parameters())
    if hasattr(layer, "sampler"):
        assert layer.sampler.device.type == "cuda"
    x, t = batch()
    layer(x.cuda(), t.cuda()).backward()


@pytest.mark.parametrize("name", SAMPLING)
def test_generator_makes_training_reproducible(name):
    layer = LAYERS[name]()
    x, t = batch()
    losses, grads = [], []
    for seed in (7, 7, 8):
        layer.zero_grad()
        loss = layer(x, t, generator=torch.Generator().manual_seed(seed))
        loss.backward()
        losses.append(loss.detach())
        grads.append(layer.linear_weight.grad.clone())
    assert torch.equal(losses[0], losses[1]) and torch.equal(grads[0], grads[1])
    assert not torch.equal(grads[0], grads[2])  # another seed draws other samples
    # the global generator is left alone
    torch.manual_seed(3)
    expected = torch.rand(1)
    torch.manual_seed(3)
    layer(x, t, generator=torch.Generator().manual_seed(7))
    assert torch.equal(torch.rand(1), expected)


def test_generator_draws_what_the_functional_draws():
    layer = fs.SampledSoftmaxLoss(D, V, 5, counts=COUNTS)
    x, t = batch()
    ours = layer(x, t, generator=torch.Generator().manual_seed(4))
    ref = fs.functional.sampled_softmax_loss(
        x, layer.linear_weight, t, linear_bias=layer.linear_bias, num_sampled=5,
        sampler=layer.sampler, generator=torch.Generator().manual_seed(4))
    assert torch.equal(ours, ref)


@pytest.mark.parametrize("name", ["full", "hs"])
def test_generator_is_accepted_by_exact_layers(name):
    layer = LAYERS[name]()
    x, t = batch()
    assert torch.equal(layer(x, t), layer(x, t, generator=torch.Generator().manual_seed(1)))


@pytest.mark.parametrize("name", sorted(HEADS))
def test_every_constructor_parameter_is_documented(name):
    cls = HEADS[name]
    doc = inspect.getdoc(cls) or ""
    for param in inspect.signature(cls).parameters:  # what help() and make_head see
        if param == "self":
            continue
        names = ["device, dtype"] if param in ("device", "dtype") else [param]
        assert any(f"{n}:" in doc for n in names), f"{cls.__name__} does not document {param}"


@pytest.mark.parametrize("name", ["sampled", "nce", "neg", "hs"])
def test_counts_as_counter_with_vocab(name):
    vocab = [f"w{i}" for i in range(V)]
    counter = collections.Counter({w: int(c) for w, c in zip(vocab, COUNTS)})
    from_counter = make_head(name, D, V, num_sampled=5, counts=counter, vocab=vocab,
                             sampler=None if name == "hs" else "unigram")
    from_tensor = make_head(name, D, V, num_sampled=5, counts=COUNTS,
                            sampler=None if name == "hs" else "unigram")
    if name == "hs":
        assert torch.equal(from_counter.tree_links, from_tensor.tree_links)
    else:
        assert torch.equal(from_counter.sampler.probs, from_tensor.sampler.probs)
    with pytest.raises(ValueError, match="give vocab="):
        make_head(name, D, V, num_sampled=5, counts=dict(counter))


def test_numpy_sizes_and_counts():
    layer = fs.SampledSoftmaxLoss(np.int64(D), np.int64(V), np.int32(5),
                                  counts=COUNTS.numpy().astype(np.int64))
    assert (layer.in_features, layer.num_classes, layer.num_sampled) == (D, V, 5)
    assert type(layer.num_sampled) is int
    x, t = batch()
    assert torch.isfinite(layer(x, t))
    with pytest.raises(ValueError, match="num_classes must be a positive int"):
        fs.FullSoftmaxLoss(D, 2.5)
    with pytest.raises(ValueError, match="in_features must be a positive int"):
        fs.FullSoftmaxLoss(True, V)


def test_sampler_errors_users_meet():
    layer = fs.SampledSoftmaxLoss(D, V, 5)
    with pytest.raises(TypeError, match="moves between devices only"):
        layer.sampler.to(torch.float64)
    with pytest.raises(TypeError, match="counts must be numbers"):
        fs.SampledSoftmaxLoss(D, V, 5, counts=["many"] * V)
    with pytest.raises(ValueError, match="counts has 29 entries for 30 classes"):
        fs.SampledSoftmaxLoss(D, V, 5, counts=COUNTS[:-1])
    with pytest.raises(ValueError, match="vocab orders the entries of counts"):
        fs.SampledSoftmaxLoss(D, V, 5, vocab=list(range(V)))


def test_default_sampler_assumption_is_documented():
    for cls in (fs.SampledSoftmaxLoss, fs.NCELoss):
        assert "sorted by falling frequency" in " ".join(cls.__doc__.split()) or \
            "log-uniform" in cls.__doc__
    assert "warns once" in " ".join(fs.SampledSoftmaxLoss.__doc__.split())
    assert "falling frequency" in " ".join(fs.nn.__doc__.split())
