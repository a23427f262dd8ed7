"""The hierarchical softmax module, HierarchicalSoftmaxLoss: exact and normalised
log_prob / predict, state_dict and device moves, the zero-init prior, autocast,
torch.compile, and its use as a registered head and a language model's output. The op is
tested in tests/test_hierarchical_softmax.py, the tree in tests/test_hierarchical_tree.py."""

import pytest
import reference as R
import torch

import fastsoftmax as fs
from fastsoftmax import functional as FF

D, V = 12, 23


def make_module(device, dtype=torch.float32, V_=V):
    g = torch.Generator().manual_seed(1)
    counts = torch.randint(1, 1000, (V_,), generator=g)
    m = fs.HierarchicalSoftmaxLoss(D, V_, counts, device=device, dtype=dtype)
    with torch.no_grad():
        m.linear_weight.copy_(torch.randn(m.linear_weight.shape, generator=g) * 1.5)
    x = torch.randn(5, 4, D, generator=g, dtype=dtype).to(device)
    return m, x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log_prob_is_exact_and_normalised(device, dtype):
    m, x = make_module(device, dtype, V_=3001)
    m.chunk_bytes = 8 * 2**20  # several chunks of rows
    lp = m.log_prob(x)
    assert lp.shape == (5, 4, 3001) and lp.dtype == dtype
    total = lp.detach().double().exp().sum(-1)
    assert float((total - 1).abs().max()) <= 1e-6
    codes, points = m.tree.paths()
    ref = R.hierarchical_log_prob_reference(x.reshape(-1, D), m.linear_weight.detach(), codes,
                                            points)
    tol = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(lp.reshape(-1, 3001).double(), ref, **tol)
    assert torch.equal(m.predict(x), lp.argmax(-1))
    # The loss is -log_prob of the target, in training and in eval mode alike.
    t = torch.randint(0, 3001, (5, 4), device=device)
    picked = -lp.gather(-1, t[..., None]).squeeze(-1)
    for train in (True, False):
        m.train(train)
        torch.testing.assert_close(m(x, t), picked.mean(), **tol)
    torch.testing.assert_close(m.full_loss(x, t, reduction="none"), picked, **tol)
    torch.testing.assert_close(
        FF.hierarchical_softmax_loss(x, m.linear_weight, t, m.tree, reduction="sum", sparse=True),
        picked.sum(), **tol)


def test_module_state_and_device(device, tmp_path):
    m, x = make_module("cpu")
    t = torch.randint(0, V, (5, 4))
    expected = m(x, t)
    path = tmp_path / "hs.pt"
    torch.save(m.state_dict(), path)
    other = fs.HierarchicalSoftmaxLoss(D, V, torch.ones(V))  # another tree, same shapes
    other.load_state_dict(torch.load(path))
    assert torch.equal(other.tree.links, m.tree.links)
    torch.testing.assert_close(other(x, t), expected)
    moved = other.to(device)
    assert moved.tree.device.type == device.type
    torch.testing.assert_close(moved(x.to(device), t.to(device)).cpu(), expected)
    corrupt = m.state_dict()
    corrupt["tree_links"] = corrupt["tree_links"].clone()
    corrupt["tree_links"][0] = -1
    with pytest.raises(ValueError, match="marked as the root"):
        other.load_state_dict(corrupt)
    assert "max_depth" in repr(m)


def test_zero_init_is_the_huffman_prior():
    counts = torch.tensor([40, 20, 10, 10, 5, 5, 5, 5])
    m = fs.HierarchicalSoftmaxLoss(4, 8, counts)
    lp = m.log_prob(torch.randn(3, 4))
    torch.testing.assert_close(lp, (-m.tree.lengths.float() * 0.6931471805599453).expand(3, 8))


def test_autocast_runs_in_float32():
    m, x = make_module("cpu")
    t = torch.randint(0, V, (5, 4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = m(x.bfloat16(), t)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, m(x.bfloat16().float(), t))


def test_compile_fullgraph():
    m, x = make_module("cpu")
    t = torch.randint(0, V, (5, 4))
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    loss = compiled(x, t)
    loss.backward()
    grad = m.linear_weight.grad.clone()
    m.zero_grad()
    eager = m(x, t)
    eager.backward()
    torch.testing.assert_close(loss, eager)
    torch.testing.assert_close(grad, m.linear_weight.grad)


def test_hs_is_a_registered_head_and_an_lm_output():
    from fastsoftmax.models.lm import RNNLanguageModel
    from fastsoftmax.nn import HEADS, OutputLayer, make_head

    counts = torch.tensor([50.0, 20, 9, 9, 4, 2, 1, 1])
    head = make_head("hs", 6, 8, counts=counts, sparse=True)
    assert HEADS["hs"] is type(head) and isinstance(head, OutputLayer)
    assert head.linear_weight.shape == (7, 6)
    torch.manual_seed(0)
    lm = RNNLanguageModel(8, 6, 6, 1, output="hs", counts=counts)
    x = torch.randint(0, 8, (3, 5))
    loss, _ = lm(x, x.roll(-1, 1))
    loss.backward()
    assert torch.isfinite(loss) and lm.head.linear_weight.grad is not None
    lm.eval()
    log_p, _ = lm.log_prob(x)
    torch.testing.assert_close(log_p.exp().sum(-1), torch.ones(3, 5))
    exact = -log_p.gather(-1, x.roll(-1, 1).unsqueeze(-1)).mean()
    torch.testing.assert_close(lm(x, x.roll(-1, 1))[0], exact)
    with pytest.raises(ValueError, match="tie_weights cannot be used with output 'hs'"):
        RNNLanguageModel(8, 6, 6, 1, output="hs", counts=counts, tie_weights=True)
    with pytest.raises(ValueError, match="needs the training counts"):
        RNNLanguageModel(8, 6, 6, 1, output="hs")
