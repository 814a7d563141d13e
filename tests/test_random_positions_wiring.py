"""Randomized positions (--random-positions N, Ruoss et al. 2023 §3; modules/positions/randomized.py) wired through
the whole model (models/compgen_transformer.py): in training each stack draws one sample per batch and every
self-attention of that stack gets exactly it (cross-attention keeps plain positions), so that the stack's output is
that of the same weights attending at those positions.

The sample is fixed to 3 * (0..T-1) (every third position). RoPE (the preset random_rope_transformer_scan, which has
no absolute positions) rotates by p * w_k, so positions 3 * c are plain positions 0..T-1 with every frequency w_k
tripled: the reference is the plain rope_transformer_scan with the same weights and tripled frequencies, evaluated
(plain positions: each row counts from its first real token; RoPE is shift-invariant, so the left padding of
the encoder does not matter)."""
import pytest
import torch

from fairseq_compgen.modules.attention import MultiheadAttention
from fairseq_compgen.modules.positions import randomized
from model_helpers import build

PAD = 1
NO_DROPOUT = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, embedding_dropout=0.0)
TINY = dict(encoder_embed_dim=32, decoder_embed_dim=32, encoder_ffn_embed_dim=64, decoder_ffn_embed_dim=64,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_layers=2, decoder_layers=2)
STRIDE = 3


@pytest.fixture
def fixed_sample(monkeypatch):
    """randomized.sample_positions returns 3 * (0..T-1) (sorted, inside [0, N) for N = 128); its calls are kept."""
    calls = []

    def sample(length, n, device=None, generator=None):
        calls.append((length, n))
        return STRIDE * torch.arange(length, device=device)
    monkeypatch.setattr(randomized, "sample_positions", sample)
    return calls


def _models():
    torch.manual_seed(0)
    model = build("random_rope_transformer_scan", **NO_DROPOUT, **TINY)
    plain = build("rope_transformer_scan", **NO_DROPOUT, **TINY)
    plain.load_state_dict(model.state_dict())
    assert model.encoder.random_positions == model.decoder.random_positions == 128
    assert plain.encoder.random_positions == plain.decoder.random_positions == 0
    assert model.encoder.embed.positions is None  # RoPE only: the sample reaches the output through attention only
    return model, plain


def _inputs(model, B=3, S=7, T=6):
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, len(model.encoder.dictionary), (B, S), generator=g)
    src[0, :3] = PAD  # left padding in the encoder
    prev = torch.randint(4, len(model.decoder.dictionary), (B, T), generator=g)
    prev[:, 0] = 2
    return src, src.ne(PAD).sum(1), prev


def _tripled(plain, stack):
    """The plain model with every RoPE frequency of `stack`'s self-attentions tripled (a copy of the buffers)."""
    scorers = [layer.self_attn.scorer for layer in stack.stack.layers]
    assert scorers and all(s is not None and hasattr(s, "inv_freq") for s in scorers)
    for s in scorers:
        s.inv_freq = s.inv_freq * STRIDE
    return plain


def test_each_self_attention_gets_its_stacks_sample_and_cross_attention_none(fixed_sample, monkeypatch):
    model, _ = _models()
    got = {}  # attention module -> the positions of each call
    forward = MultiheadAttention.forward

    def recording(self, *args, positions=None, **kwargs):
        got.setdefault(self, []).append(None if positions is None else positions.tolist())
        return forward(self, *args, positions=positions, **kwargs)
    monkeypatch.setattr(MultiheadAttention, "forward", recording)
    src, lengths, prev = _inputs(model)
    S, T = src.size(1), prev.size(1)
    with torch.no_grad():
        model.train()(src, lengths, prev)
    assert fixed_sample == [(S, 128), (T, 128)]  # one draw per stack and batch, of the stack's length
    enc = [layer.self_attn for layer in model.encoder.stack.layers]
    dec = [layer.self_attn for layer in model.decoder.stack.layers]
    cross = [layer.cross_attn for layer in model.decoder.stack.layers]
    assert len(enc) == len(dec) == 2 and len(got) == 6
    for a in enc:
        assert got[a] == [[STRIDE * c for c in range(S)]]
    for a in dec:
        assert got[a] == [[STRIDE * c for c in range(T)]]
    for a in cross:
        assert got[a] == [None]
    with torch.no_grad():  # evaluation: plain positions everywhere, no draw
        got.clear()
        model.eval()(src, lengths, prev)
    assert len(fixed_sample) == 2 and all(calls == [None] for calls in got.values())


def test_encoder_in_training_is_the_encoder_at_the_sampled_positions(fixed_sample):
    model, plain = _models()
    src, lengths, prev = _inputs(model)
    keep = src.ne(PAD)
    with torch.no_grad():
        at_plain = plain.eval().encoder(src, lengths)["encoder_out"][0]
        trained = model.train().encoder(src, lengths)["encoder_out"][0]
        expected = _tripled(plain, plain.encoder).encoder(src, lengths)["encoder_out"][0]
    assert fixed_sample == [(src.size(1), 128)]
    assert torch.allclose(trained[keep], expected[keep], atol=1e-5), (trained - expected)[keep].abs().max()
    assert (trained - at_plain)[keep].abs().max() > 1e-3  # the sample changed the output: not 0..S-1


def test_decoder_in_training_is_the_decoder_at_the_sampled_positions(fixed_sample):
    model, plain = _models()
    src, lengths, prev = _inputs(model)
    with torch.no_grad():
        enc = plain.eval().encoder(src, lengths)  # one encoder output for both decoders
        at_plain = plain.decoder(prev, enc)[0]
        trained = model.train().decoder(prev, enc)[0]
        expected = _tripled(plain, plain.decoder).decoder(prev, enc)[0]
    assert fixed_sample == [(prev.size(1), 128)]
    assert torch.allclose(trained, expected, atol=1e-5), (trained - expected).abs().max()
    assert (trained - at_plain).abs().max() > 1e-3  # the sample changed the output: not 0..T-1
