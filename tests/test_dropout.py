"""modules/dropout.py against the definition of dropout (Srivastava et al. 2014): keep with probability 1 - p,
scale kept elements by 1 / (1 - p); identity in eval mode; gradient = mask / (1 - p)."""
import pytest
import torch

from fairseq_compgen.modules.dropout import Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_keep_rate_scale_and_gradient(p):
    torch.manual_seed(0)
    x = torch.rand(1000, 1000) + 0.5  # no zeros, so a zero in the output means "dropped"
    x.requires_grad_(True)
    y = dropout(x, p, training=True)
    kept = y.ne(0)
    n = kept.numel()
    sd = (p * (1 - p) / n) ** 0.5
    assert abs(kept.float().mean().item() - (1 - p)) < 5 * sd  # binomial keep rate
    assert torch.allclose(y[kept], x[kept] / (1 - p))
    y.sum().backward()
    assert torch.allclose(x.grad, kept.float() / (1 - p))


def test_eval_and_edge_probabilities():
    x = torch.randn(4, 5)
    assert dropout(x, 0.3, training=False) is x
    assert dropout(x, 0.0, training=True) is x
    assert dropout(x, 1.0, training=True).eq(0).all()
    m = Dropout(0.3).eval()
    assert torch.equal(m(x), x)
    with pytest.raises(ValueError, match=r"dropout probability must be in \[0, 1\]"):
        Dropout(1.5)


def test_masks_are_independent_of_each_other_and_reproducible():
    torch.manual_seed(1)
    a = dropout(torch.ones(10000), 0.5, True)
    b = dropout(torch.ones(10000), 0.5, True)
    torch.manual_seed(1)
    assert torch.equal(dropout(torch.ones(10000), 0.5, True), a)  # same seed, same mask
    agree = a.eq(b).float().mean().item()
    assert 0.45 < agree < 0.55  # two draws agree on about half the elements


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_keeps_the_keep_rate(dtype):
    """A bf16/fp16 input (autocast, --fp16) gets the float32 mask: keep rate 1 - p, not bf16's coarse draws
    (which kept 89.8 % at p = 0.1); the output keeps the input's dtype."""
    torch.manual_seed(0)
    x = torch.ones(2000, 1000, dtype=dtype, requires_grad=True)
    y = dropout(x, 0.1, training=True)
    assert y.dtype == dtype
    sd = (0.1 * 0.9 / y.numel()) ** 0.5
    assert abs(y.ne(0).float().mean().item() - 0.9) < 5 * sd
    y.float().sum().backward()
    assert x.grad.dtype == dtype and torch.equal(x.grad.ne(0), y.ne(0))


def test_float32_masks_are_the_same_draws_as_before():
    """The float32 path draws exactly what torch.rand_like did (runs stay reproducible across this change)."""
    x = torch.rand(64, 33) + 0.5
    torch.manual_seed(3)
    expected = torch.rand_like(x).ge(0.2)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.2, training=True).ne(0), expected)
