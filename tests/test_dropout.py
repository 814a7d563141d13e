"""modules/dropout.py against the definition of dropout (Srivastava et al. 2014): keep with probability 1 - p,
scale kept elements by 1 / (1 - p); identity in eval mode; gradient = mask / (1 - p); and its mask against a slow,
direct reading of the draw it documents (four 15-bit uniforms per 64-bit draw, p rounded to a multiple of 2^-15)."""
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


def test_the_mask_is_the_documented_draw():
    """The keep-mask, against a direct reading of the module's docstring with Python integers: element i takes the
    (i mod 4)-th 16-bit lane of the (i div 4)-th int64 draw (shifts, not a memory view), top bit cleared, and is
    dropped when that is below round(p * 2^15); kept elements are scaled by 2^15 / (2^15 - round(p * 2^15))."""
    x = torch.rand(7, 9, 5) + 0.5  # 315 elements: the last draw's lanes are used in part
    for p in (0.1, 0.2, 0.5):
        torch.manual_seed(3)
        y = dropout(x, p, training=True)
        torch.manual_seed(3)
        words = torch.empty((x.numel() + 3) // 4, dtype=torch.int64).random_().tolist()
        dropped = round(p * 2**15)
        keep = [((words[i // 4] >> (16 * (i % 4))) & 0x7FFF) >= dropped for i in range(x.numel())]
        expected = torch.tensor(keep).view(x.shape).float() * (2**15 / (2**15 - dropped))
        assert torch.equal(y, x * expected), p


def test_the_four_lanes_of_a_draw_are_uniform_and_independent():
    """Each of the four elements that share an int64 draw is kept at rate 1 - p (the highest lane, whose top bit
    the draw never sets, included), and masks of neighbouring elements are uncorrelated; the mean of dropout(1)
    is 1 (the scale follows the rounded p)."""
    torch.manual_seed(0)
    n = 4 * 500_000
    for p in (0.1, 0.5):
        y = dropout(torch.ones(n), p, training=True)
        kept = y.ne(0).float().view(-1, 4)  # [draws, lanes]
        q = 1 - round(p * 2**15) / 2**15
        sd = (q * (1 - q) / kept.size(0)) ** 0.5
        assert (kept.mean(0) - q).abs().max().item() < 5 * sd, kept.mean(0)
        centred = kept - q
        for a, b in ((0, 1), (1, 2), (2, 3), (3, 0)):
            corr = (centred[:, a] * centred[:, b]).mean().item() / (q * (1 - q))
            assert abs(corr) < 5 / kept.size(0) ** 0.5, (p, a, b, corr)
        assert abs(y.mean().item() - 1) < 5 * (p / (1 - p) / n) ** 0.5


def test_probabilities_below_and_above_the_grid():
    """p rounds to a multiple of 2^-15: below half a step nothing is dropped (and nothing scaled); within half a
    step of 1 everything is."""
    x = torch.rand(100, 100) + 0.5
    assert torch.equal(dropout(x, 1e-6, training=True), x)
    assert dropout(x, 1 - 1e-6, training=True).eq(0).all()


# ---- the dropouts of a model layer (models/compgen_transformer.py), each on its own ----------------------------
MODEL_DROPOUTS = ("dropout", "attention_dropout", "activation_dropout", "embedding_dropout")


@pytest.mark.parametrize("flag", [None, *MODEL_DROPOUTS])
def test_each_model_dropout_acts_in_training_only(flag):
    """With only `flag` at 0.3 (--dropout: after every sublayer, the residual's; --attention-dropout: on the
    attention probabilities, self and cross; --activation-dropout: inside the feed-forward block;
    --embedding-dropout: on the input embeddings), training-mode output differs from evaluation-mode output, in the
    encoder and in the decoder (fed the same encoder output); with every dropout at 0 (None) they are the same."""
    from model_helpers import build

    torch.manual_seed(0)
    probs = {name: 0.3 if name == flag else 0.0 for name in MODEL_DROPOUTS}  # all four set: none follows another
    model = build("compgen_transformer", encoder_layers=1, decoder_layers=1, encoder_embed_dim=16, decoder_embed_dim=16,
                  encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32, encoder_attention_heads=2,
                  decoder_attention_heads=2, **probs)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, len(model.encoder.dictionary), (4, 9), generator=g)
    prev = torch.randint(4, len(model.decoder.dictionary), (4, 8), generator=g)
    lengths = torch.full((4,), 9)
    with torch.no_grad():
        enc = model.eval().encoder(src, lengths)
        dec = model.decoder(prev, enc)[0]
        torch.manual_seed(1)
        enc_train = model.train().encoder(src, lengths)
        dec_train = model.decoder(prev, enc)[0]  # the evaluation-mode encoder output: the decoder's own dropouts
    enc_diff = (enc_train["encoder_out"][0] - enc["encoder_out"][0]).abs().max().item()
    dec_diff = (dec_train - dec).abs().max().item()
    if flag is None:
        assert enc_diff < 1e-5 and dec_diff < 1e-5, (enc_diff, dec_diff)
    else:
        assert enc_diff > 1e-2 and dec_diff > 1e-2, (flag, enc_diff, dec_diff)
