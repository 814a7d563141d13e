"""modules/softmax.py against the definition p_j = exp(x_j) / sum_k exp(x_k) written directly in float64, and against
torch.softmax: values, gradients, masked (-inf) entries, dtypes, and which rows take the composite."""
import pytest
import torch

import fairseq_compgen.modules.softmax as sm


def direct(x: torch.Tensor) -> torch.Tensor:
    """The formula, slowly: float64, one row at a time, max subtracted for range only."""
    rows = x.double().reshape(-1, x.size(-1))
    out = torch.empty_like(rows)
    for i, r in enumerate(rows):
        e = [torch.exp(v - r.max()) for v in r]
        total = sum(e)
        out[i] = torch.stack([v / total for v in e])
    return out.reshape(x.shape)


@pytest.fixture
def composite_below(monkeypatch):
    """Pretend the CPU's vector register holds `nbytes` bytes (AVX-512: 64), whatever this machine has."""
    def set_register(nbytes):
        monkeypatch.setattr(sm, "_CPU_REGISTER", nbytes)
    return set_register


@pytest.mark.parametrize("k", [1, 2, 5, 10, 13, 15])
def test_short_rows_match_the_formula_and_torch(k, composite_below):
    composite_below(64)
    torch.manual_seed(k)
    x = (3 * torch.randn(6, 4, 7, k)).requires_grad_()
    g = torch.randn(6, 4, 7, k)
    p = sm.softmax(x)
    assert p.grad_fn is not None and "ShortRowSoftmax" in type(p.grad_fn).__name__  # the composite ran
    torch.testing.assert_close(p.double(), direct(x.detach()), rtol=1e-6, atol=1e-7)
    ref = x.detach().clone().requires_grad_()
    want = torch.softmax(ref, dim=-1)
    torch.testing.assert_close(p, want, rtol=2e-6, atol=1e-7)
    (p * g).sum().backward()
    (want * g).sum().backward()
    torch.testing.assert_close(x.grad, ref.grad, rtol=1e-5, atol=1e-6)
    # the gradient of the formula itself: dp_j/dx_i = p_j (delta_ij - p_i), checked in float64 by autograd
    xd = x.detach().double().requires_grad_()
    assert torch.autograd.gradcheck(lambda t: sm._ShortRowSoftmax.apply(t), (xd[:1, :1],))


def test_masked_entries_get_zero_probability_and_no_gradient(composite_below):
    composite_below(64)
    x = torch.randn(3, 5, 9)
    blocked = torch.zeros(3, 5, 9, dtype=torch.bool)
    blocked[..., 6:] = True  # padding keys
    blocked[0, :, :2] = True
    x = x.masked_fill(blocked, float("-inf")).requires_grad_()
    p = sm.softmax(x)
    assert p[blocked].eq(0).all()
    torch.testing.assert_close(p.sum(-1), torch.ones(3, 5))
    torch.testing.assert_close(p, torch.softmax(x.detach(), -1))
    p.pow(2).sum().backward()
    assert x.grad[blocked].eq(0).all() and torch.isfinite(x.grad).all()


def test_a_row_with_no_allowed_key_is_nan_as_in_torch(composite_below):
    composite_below(64)
    x = torch.full((2, 4), float("-inf"))
    x[1] = torch.randn(4)
    p, want = sm.softmax(x), torch.softmax(x, -1)
    assert torch.isnan(p[0]).all() and torch.isnan(want[0]).all()
    torch.testing.assert_close(p[1], want[1])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_is_computed_in_float32_and_keeps_its_dtype(dtype, composite_below):
    composite_below(64)
    torch.manual_seed(0)
    x = torch.randn(50, 11).to(dtype).requires_grad_()
    p = sm.softmax(x)
    assert p.dtype == dtype
    torch.testing.assert_close(p, torch.softmax(x.detach().float(), -1).to(dtype), rtol=0, atol=0)  # rounded once
    p.float().sum().backward()
    assert x.grad.dtype == dtype and torch.isfinite(x.grad).all()


def test_which_rows_take_the_composite(composite_below):
    """Rows shorter than one register (in bytes) take the composite, the others torch.softmax; a CPU whose
    capability was not measured (register 0) always takes torch.softmax."""
    def composite(x):
        return "ShortRowSoftmax" in type(sm.softmax(x.requires_grad_()).grad_fn).__name__
    composite_below(64)  # AVX-512
    assert composite(torch.randn(2, 15)) and not composite(torch.randn(2, 16))
    assert composite(torch.randn(2, 31, dtype=torch.bfloat16)) and not composite(torch.randn(2, 32, dtype=torch.bfloat16))
    composite_below(32)  # AVX2
    assert composite(torch.randn(2, 7)) and not composite(torch.randn(2, 8))
    composite_below(0)
    assert not composite(torch.randn(2, 3))
    assert sm._REGISTER_BYTES == {"AVX512": 64, "AVX2": 32}


def test_attention_training_path_is_unchanged_up_to_rounding(composite_below):
    """The one encoder-decoder in training mode (attention dropout on, so the explicit softmax path): the same loss
    and gradients with the composite as with torch.softmax, from the same weights and dropout masks."""
    from fairseq_compgen.models.standalone import build_model

    results = []
    for nbytes in (64, 0):  # composite for SCAN's short rows, then torch.softmax everywhere
        composite_below(nbytes)
        torch.manual_seed(0)
        model = build_model("rel_uni_transformer_scan", src_words=12, tgt_words=10, encoder_embed_dim=32,
                            decoder_embed_dim=32, encoder_ffn_embed_dim=64, decoder_ffn_embed_dim=64,
                            encoder_attention_heads=2, decoder_attention_heads=2, encoder_layers=2,
                            decoder_layers=2).train()
        g = torch.Generator().manual_seed(1)
        src = torch.randint(4, 16, (5, 7), generator=g)
        prev = torch.randint(4, 14, (5, 9), generator=g)
        logits, _ = model(src, torch.full((5,), 7), prev)
        loss = logits.float().log_softmax(-1).mean()
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    (a, ga), (b, gb) = results
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert len(ga) == len(gb)
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)
