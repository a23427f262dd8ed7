"""Every output layer as a drop-in for torch.nn.LinearCrossEntropyLoss, and the layer defects
the review found: the sampler carried by state_dict/.to()/deepcopy/torch.save, make_head
refusing an option the head cannot honour, numpy integers as sizes, a bad generator caught
at the API boundary, and one HierarchicalSoftmaxLoss whose buffers honour dtype=/device=."""

import copy
import inspect
import io

import numpy as np
import pytest
import torch

import fastsoftmax as fs
from fastsoftmax.nn import make_head

D, V, S = 6, 30, 5
COUNTS = torch.arange(V, 0, -1).double()
LINEAR_LAYERS = {  # the class name changed, and the sampling options added
    "full": lambda *a, **kw: fs.FullSoftmaxLoss(*a, **kw),
    "sampled": lambda *a, **kw: fs.SampledSoftmaxLoss(*a, num_sampled=S, counts=COUNTS, **kw),
    "nce": lambda *a, **kw: fs.NCELoss(*a, num_sampled=S, **kw),
    "neg": lambda *a, **kw: fs.NegativeSamplingLoss(*a, num_negatives=S, **kw),
}
SAMPLING = ["sampled", "nce", "neg"]
# They load torch's state dict as well, but train and evaluate a hinge loss: no drop-in.
MARGIN_LAYERS = {
    "multi_margin": lambda *a, **kw: fs.MultiMarginLoss(*a, **kw),
    "margin_ranking": lambda *a, **kw: fs.SampledMarginRankingLoss(*a, num_sampled=S, **kw),
    "warp": lambda *a, **kw: fs.WARPLoss(*a, num_sampled=S, **kw),
}


def batch(seed=0, dtype=torch.float32, n=12):
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(0, V, (n,), generator=g)
    target[3] = -100  # an ignored row
    return torch.randn(n, D, generator=g, dtype=dtype), target


def torch_layer(**kw):
    return torch.nn.LinearCrossEntropyLoss(D, V, **kw)


# -- drop-in for torch.nn.LinearCrossEntropyLoss -----------------------------------------

def test_signatures_match_torch():
    theirs = inspect.signature(torch.nn.LinearCrossEntropyLoss).parameters
    for cls in (fs.FullSoftmaxLoss, fs.SampledSoftmaxLoss, fs.NCELoss,
                fs.NegativeSamplingLoss, fs.HierarchicalSoftmaxLoss):
        ours = inspect.signature(cls).parameters
        assert list(ours)[:2] == ["in_features", "num_classes"], cls
        for name, param in theirs.items():
            assert name in ours, f"{cls.__name__} lacks {name}"
            assert ours[name].default == param.default, f"{cls.__name__}.{name}"


@pytest.mark.parametrize("name", list(LINEAR_LAYERS))
@pytest.mark.parametrize("bias", [False, True])
def test_state_dicts_interchange_with_torch(name, bias):
    if name == "neg" and bias:
        pytest.skip("negative sampling has no bias (refused: test_neg_refuses_a_bias)")
    class_weight = torch.linspace(0.5, 2.0, V)
    options = dict(weight=class_weight, label_smoothing=0.1 if name in ("full", "sampled")
                   else 0.0, ignore_index=None, bias=bias)
    theirs = torch_layer(**options)
    torch.nn.init.normal_(theirs.linear.weight)
    if bias:
        torch.nn.init.normal_(theirs.linear.bias)
    ours = LINEAR_LAYERS[name](D, V, **options)
    ours.load_state_dict(theirs.state_dict())  # strict
    assert torch.equal(ours.linear.weight, theirs.linear.weight)
    assert ours.linear_weight is ours.linear.weight
    x, t = batch()
    ours.eval()
    torch.testing.assert_close(ours(x, t), theirs(x, t))
    # and back: a trained fastsoftmax layer evaluated by PyTorch's own module
    torch.nn.init.normal_(ours.linear.weight)
    back = torch_layer(**options)
    result = back.load_state_dict(ours.state_dict(), strict=False)
    assert result.missing_keys == []
    assert all(k.startswith(("sampler_tables.", "log_z")) for k in result.unexpected_keys)
    torch.testing.assert_close(back(x, t), ours(x, t))


@pytest.mark.parametrize("name", list(MARGIN_LAYERS))
@pytest.mark.parametrize("bias", [False, True])
def test_margin_layers_load_torch_s_state_dict(name, bias):
    theirs = torch_layer(bias=bias)
    torch.nn.init.normal_(theirs.linear.weight)
    ours = MARGIN_LAYERS[name](D, V, bias=bias)
    ours.load_state_dict(theirs.state_dict())  # strict
    assert torch.equal(ours.linear.weight, theirs.linear.weight)
    if bias:
        assert torch.equal(ours.linear.bias, theirs.linear.bias)
    x, t = batch()
    # The same weights score the classes alike: the layer predicts torch's argmax logit.
    assert torch.equal(ours.eval().predict(x), theirs.linear(x).argmax(-1))
    back = torch_layer(bias=bias)
    result = back.load_state_dict(ours.state_dict(), strict=False)
    assert result.missing_keys == []
    assert all(k.startswith("sampler_tables.") for k in result.unexpected_keys)
    assert torch.equal(back.linear.weight, ours.linear.weight)


def test_the_layers_listed_in_the_api_guide_are_the_ones_that_load_torch_s_state_dict():
    # docs/api.md names the layers that load it: the drop-ins (LINEAR_LAYERS) and the margin
    # layers. Every other built-in head refuses it, so a new head must be placed in a list.
    listed = {type(make(D, V)) for make in [*LINEAR_LAYERS.values(), *MARGIN_LAYERS.values()]}
    state = torch_layer().state_dict()
    for cls in set(fs.nn.HEADS.values()) - listed:
        if not cls.__module__.startswith("fastsoftmax."):
            continue  # a head another test registered
        layer = make_head(next(k for k, v in fs.nn.HEADS.items() if v is cls), D, V,
                          num_sampled=S, counts=COUNTS)
        with pytest.raises(ValueError):
            layer.load_state_dict(state)
    assert fs.HierarchicalSoftmaxLoss not in listed


def test_full_softmax_state_dict_is_torch_s_exactly():
    ours, theirs = fs.FullSoftmaxLoss(D, V, bias=True), torch_layer(bias=True)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    theirs.load_state_dict(ours.state_dict())  # strict both ways


def test_defaults_follow_torch():
    layer = fs.SampledSoftmaxLoss(D, V, S)
    assert layer.linear.bias is None and layer.linear_bias is None
    assert isinstance(layer.linear, torch.nn.Linear)
    assert layer.ignore_index == -100  # None means -100, as torch's module
    with pytest.raises((AttributeError, KeyError)):  # read-only: set linear.weight
        layer.linear_weight = torch.nn.Parameter(torch.zeros(V, D))


def test_out_features_and_options_are_refused():
    with pytest.raises(ValueError, match="out_features"):
        fs.FullSoftmaxLoss(D, V, out_features=(2,))
    with pytest.raises(ValueError, match="options"):
        fs.SampledSoftmaxLoss(D, V, S, options=torch.nn.LinearCrossEntropyOptions())


def test_neg_refuses_a_bias():
    with pytest.raises(ValueError, match="NegativeSamplingLoss has no bias"):
        fs.NegativeSamplingLoss(D, V, S, bias=True)


def test_hierarchical_softmax_refuses_torch_parameters():
    with pytest.raises(ValueError, match="HierarchicalSoftmaxLoss has no bias"):
        fs.HierarchicalSoftmaxLoss(D, V, COUNTS, bias=True)
    layer = fs.HierarchicalSoftmaxLoss(D, V, COUNTS)
    with pytest.raises(ValueError, match="inner node"):
        layer.load_state_dict(torch_layer().state_dict())


def test_tying_and_old_keys_still_work():
    embedding = torch.nn.Embedding(V, D)
    layer = fs.SampledSoftmaxLoss(D, V, S, linear_weight=embedding.weight, bias=True)
    assert layer.linear.weight is embedding.weight
    old = {"linear_weight": torch.randn(V, D), "linear_bias": torch.randn(V)}
    layer.load_state_dict(old, strict=False)
    assert torch.equal(layer.linear.weight, old["linear_weight"])
    assert torch.equal(layer.linear.bias, old["linear_bias"])


# -- one HierarchicalSoftmaxLoss ----------------------------------------------------------

def test_one_hierarchical_softmax_class():
    from fastsoftmax.losses import hierarchical
    assert fs.HierarchicalSoftmaxLoss is fs.nn.HierarchicalSoftmaxLoss
    assert fs.HierarchicalSoftmaxLoss is hierarchical.HierarchicalSoftmaxLoss
    assert fs.nn.HEADS["hs"] is fs.HierarchicalSoftmaxLoss


def test_hierarchical_buffers_honour_factory_arguments():
    layer = fs.HierarchicalSoftmaxLoss(D, V, COUNTS, weight=torch.ones(V), device="cpu",
                                       dtype=torch.float64)
    assert layer.linear_weight.dtype == torch.float64
    assert layer.weight.dtype == torch.float64  # the class weight follows dtype=
    assert layer.tree_links.device == layer.linear_weight.device


# -- the sampler travels with the module ---------------------------------------------------

def draws(layer):
    return layer.sampler.sample(64, generator=torch.Generator().manual_seed(5))


def sampling_layer(name, counts=COUNTS):
    cls = {"sampled": fs.SampledSoftmaxLoss, "nce": fs.NCELoss, "neg": fs.NegativeSamplingLoss}
    return cls[name](D, V, S, counts=counts)


@pytest.mark.parametrize("name", SAMPLING)
def test_sampler_is_in_the_state_dict(name, device):
    layer = sampling_layer(name).to(device)
    fresh = sampling_layer(name, counts=torch.ones(V)).to(device)
    assert not torch.equal(draws(fresh), draws(layer))
    fresh.load_state_dict(layer.state_dict())
    assert torch.equal(draws(fresh), draws(layer))
    torch.testing.assert_close(fresh.sampler.probs, layer.sampler.probs)


@pytest.mark.parametrize("name", SAMPLING)
def test_sampler_survives_save_load_and_deepcopy(name, device):
    layer = sampling_layer(name).to(device)
    buffer = io.BytesIO()
    torch.save(layer, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    twin = copy.deepcopy(layer)
    for other in (loaded, twin):
        assert torch.equal(draws(other), draws(layer))
        x, t = (a.to(device) for a in batch())
        g = [torch.Generator().manual_seed(9) for _ in range(2)]
        assert torch.equal(other(x, t, generator=g[0]), layer(x, t, generator=g[1]))


def test_the_alias_table_is_interleaved_and_a_state_dict_of_two_halves_loads():
    """The table is one 8-byte entry a class (a draw reads one place); a state dict saved
    before that, with the table as two flat tensors, loads into a layer and draws the same."""
    layer = fs.SampledSoftmaxLoss(D, V, S, counts=COUNTS)
    prob, alias = layer.sampler.alias_table
    assert prob.stride() == alias.stride() == (2,)
    assert alias.data_ptr() == prob.data_ptr() + 4
    old = {k: v for k, v in layer.state_dict().items() if not k.endswith("entries")}
    old["sampler_tables.prob_table"] = prob.contiguous()
    old["sampler_tables.alias_table"] = alias.contiguous()
    other = fs.SampledSoftmaxLoss(D, V, S, counts=torch.ones(V))
    assert not torch.equal(draws(other), draws(layer))
    other.load_state_dict(old)
    assert torch.equal(draws(other), draws(layer))


def test_to_moves_the_sampler_and_keeps_its_tables():
    layer = fs.SampledSoftmaxLoss(D, V, S, counts=COUNTS)
    before = draws(layer)
    probs = layer.sampler.probs.clone()
    for cast in (torch.nn.Module.double, torch.nn.Module.half, torch.nn.Module.float):
        cast(layer)
        assert layer.sampler.alias_table[0].dtype == torch.float32  # a table, not a parameter
        assert torch.equal(layer.sampler.probs, probs)  # never rounded through float16
        assert torch.equal(draws(layer), before)
    layer.to("meta")
    assert layer.sampler.device.type == "meta"
    assert all(b.device.type == "meta" for b in layer.buffers())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_to_cuda_draws_what_the_cpu_drew():
    layer = fs.SampledSoftmaxLoss(D, V, S, counts=COUNTS)
    before = draws(layer)
    layer.cuda()
    assert layer.sampler.device.type == "cuda"
    assert torch.equal(draws(layer).cpu(), before)


# -- make_head refuses an option the head cannot honour ------------------------------------

@pytest.mark.parametrize("head, option", [
    ("full", {"sparse": True}), ("full", {"power": 0.5}), ("full", {"sampler": "uniform"}),
    ("full", {"counts": COUNTS}), ("neg", {"bias": True}), ("hs", {"bias": True}),
    ("hs", {"sampler": "unigram"}),
])
def test_make_head_refuses_an_option_it_would_drop(head, option):
    (key,) = option
    with pytest.raises(ValueError) as refused:
        make_head(head, D, V, num_sampled=S, **({"counts": COUNTS} if head == "hs" else {}),
                  **option)
    text = str(refused.value)  # names the option and the head
    assert key in text and fs.nn.HEADS[head].__name__ in text, text


def test_make_head_passes_unset_options_quietly():
    layer = make_head("full", D, V, sampler=None, counts=None, power=0.75, sparse=False)
    assert isinstance(layer, fs.FullSoftmaxLoss)


# -- numpy integers are sizes ---------------------------------------------------------------

def test_numpy_integers_everywhere():
    x, t = batch()
    w = torch.randn(V, D)
    for loss in (fs.functional.sampled_softmax_loss, fs.functional.nce_loss):
        loss(x, w, t, num_sampled=np.int64(S), num_true=np.int64(1))
    fs.functional.negative_sampling_loss(x, w, t, num_negatives=np.int32(S))
    make_head("sampled", D, V, num_sampled=np.int64(S))
    fs.UnigramSampler(COUNTS, num_reserved_ids=np.int64(1))
    with pytest.raises((TypeError, ValueError), match="num_sampled"):
        fs.functional.sampled_softmax_loss(x, w, t, num_sampled=True)


# -- a bad generator is refused where it is given -------------------------------------------

BAD_GENERATORS = [(7, TypeError, "torch.Generator"), ("cpu", TypeError, "torch.Generator")] + (
    [(torch.Generator("cuda"), ValueError, "CPU torch.Generator")]
    if torch.cuda.is_available() else [])


@pytest.mark.parametrize("bad, error, text", BAD_GENERATORS)
def test_bad_generator_refused_by_the_functionals(bad, error, text):
    x, t = batch()
    w = torch.randn(V, D)
    sampled = fs.LogUniformSampler(V).candidates(t.clamp(min=0)[:, None], S)
    with pytest.raises(error, match=text):  # given samples: the generator is never used
        fs.functional.sampled_softmax_loss(x, w, t, sampled=sampled, generator=bad)
    with pytest.raises(error, match=text):
        fs.functional.nce_loss(x, w, t, sampled=sampled, generator=bad)
    with pytest.raises(error, match=text):
        fs.functional.negative_sampling_loss(x, w, t, negatives=torch.zeros(S).long(),
                                             generator=bad)


@pytest.mark.parametrize("bad, error, text", BAD_GENERATORS)
@pytest.mark.parametrize("name", list(LINEAR_LAYERS) + ["hs"])
def test_bad_generator_refused_by_the_modules(name, bad, error, text):
    layer = (fs.HierarchicalSoftmaxLoss(D, V, COUNTS) if name == "hs"
             else LINEAR_LAYERS[name](D, V))
    x, t = batch()
    for mode in (True, False):
        layer.train(mode)
        with pytest.raises(error, match=text):
            layer(x, t, generator=bad)
