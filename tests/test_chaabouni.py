"""Chaabouni, Dessì, Kharitonov (2021): SAG, T5 bias, fixed span, convolution as self-attention.

Each mechanism against a slow, loop-by-loop implementation of its formula; decoding step by step against the
full forward pass; the gate against sigma(beta_0); parameter counts; presets; the Figure 1 script.
"""
import argparse
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq.models import ARCH_CONFIG_REGISTRY

from fairseq_compgen.models.archs_chaabouni import COLUMNS, SETUPS
from fairseq_compgen.models.compgen_transformer import CompgenTransformerModel
from fairseq_compgen.modules.attention import MultiheadAttention
from fairseq_compgen.modules.conv_self_attention import ConvSelfAttention
from fairseq_compgen.modules.layers import DecoderLayer, EncoderLayer
from fairseq_compgen.modules.self_attention_gate import SelfAttentionGate
from fairseq_compgen.modules.span_scorers import FixedSpanMask, T5RelativeBias
from model_helpers import build

PAD = 1
REPO = Path(__file__).resolve().parents[1]
NEW_ARCHS = sorted(COLUMNS)  # the SCAN presets; every `<column>_<setup>` is also in test_models' decoding test
SMALL = dict(encoder_embed_dim=16, decoder_embed_dim=16, encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32,
             encoder_attention_heads=4, decoder_attention_heads=4, encoder_layers=2, decoder_layers=3)


# ---- slow references ------------------------------------------------------------------------------------------
def t5_bias_formula(scorer, h, i, j):
    """b_ij = B_h[clip(j - i, -s, s)], the table stored at column d + s."""
    s = scorer.span
    d = max(-s, min(s, j - i))
    return float(scorer.relative_bias[h, d + s])


def fixed_span_formula(scorer, h, i, j):
    return float("-inf") if abs(i - j) > scorer.span else 0.0


def slow_biased_attention(attn: MultiheadAttention, x, pad_mask, causal, bias_formula):
    """Eq. 3 with loops over b, h, i, j: alpha_ij = q_i.k_j / sqrt(d_head) + b_ij, softmax over unmasked j."""
    B, T, C = x.shape
    H, dh = attn.num_heads, attn.head_dim
    q = attn.q_proj(x).view(B, T, H, dh).double()
    k = attn.k_proj(x).view(B, T, H, dh).double()
    v = attn.v_proj(x).view(B, T, H, dh).double()
    out = torch.zeros(B, T, H, dh, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(T):
                logits = torch.empty(T, dtype=torch.float64)
                for j in range(T):
                    blocked = bool(pad_mask[b, j]) or (causal and j > i)
                    a = float(q[b, i, h] @ k[b, j, h]) / math.sqrt(dh) + bias_formula(attn.scorer, h, i, j)
                    logits[j] = float("-inf") if blocked else a
                w = torch.softmax(logits, 0)
                out[b, i, h] = sum(w[j] * v[b, j, h] for j in range(T) if w[j] > 0)
    return attn.out_proj(out.view(B, T, C).float())


def slow_convolution(conv: ConvSelfAttention, x, pad_mask):
    """out_i = W_o concat_h sum_{d=-s}^{hi} softmax(w_h)[d] (W_v x_{i+d})_h, x_{i+d} = 0 outside / at pads."""
    B, T, C = x.shape
    H, dh, s = conv.num_heads, conv.head_dim, conv.span
    hi = 0 if conv.causal else s
    v = conv.v_proj(x).view(B, T, H, dh).double()
    taps = torch.softmax(conv.kernel.double(), dim=-1)  # [H, K], column d + s
    out = torch.zeros(B, T, H, dh, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(T):
                for d in range(-s, hi + 1):
                    j = i + d
                    if 0 <= j < T and not pad_mask[b, j]:
                        out[b, i, h] += taps[h, d + s] * v[b, j, h]
    return conv.out_proj(out.view(B, T, C).float())


def _random_inputs(seed=0, B=3, T=8, C=16, left_pad=(0, 3, 6)):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, C, generator=g)
    pad = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(left_pad):
        pad[b, :n] = True
    return x, pad


# ---- the biases inside a full attention forward -----------------------------------------------------------------
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("span", [1, 2])
@pytest.mark.parametrize("kind", ["t5", "fixed_span"])
def test_biased_attention_matches_eq3(kind, span, causal):
    torch.manual_seed(0)
    C, H = 16, 4
    cls, formula = {"t5": (T5RelativeBias, t5_bias_formula), "fixed_span": (FixedSpanMask, fixed_span_formula)}[kind]
    attn = MultiheadAttention(C, H, dropout=0.0, bias=True, scorer=cls(C, H, causal, span=span)).eval()
    if kind == "t5":  # the table starts at 0: make every entry distinct
        with torch.no_grad():
            attn.scorer.relative_bias.normal_(0, 2.0)
    x, pad = _random_inputs()  # left-padded keys: 0, 3 and 6 pads
    with torch.no_grad():
        fast = attn(x, key_padding_mask=pad, causal=causal)
        slow = slow_biased_attention(attn, x, pad, causal, formula)
    keep = ~pad  # outputs at padded queries are never read
    assert torch.allclose(fast[keep], slow[keep], atol=1e-5), (fast - slow)[keep].abs().max()
    assert torch.isfinite(fast).all(), "pad queries with no real key in their span must not produce NaN"


def test_t5_bias_is_one_per_batch_and_clipped():
    scorer = T5RelativeBias(16, 4, False, span=2)
    with torch.no_grad():
        scorer.relative_bias.copy_(torch.arange(20.0).view(4, 5))
    q = torch.zeros(7, 4, 3, 4)  # a batch of 7: the bias must not depend on it
    bias = scorer.bias(q, torch.arange(3, 5), torch.arange(9), scale=0.25)  # queries 3, 4 (incremental steps)
    assert bias.shape == (4, 2, 9)  # [H, Tq, Tk]
    for h in range(4):
        for i, qi in enumerate((3, 4)):
            for j in range(9):
                assert bias[h, i, j] == 5 * h + max(-2, min(2, j - qi)) + 2  # not scaled by `scale`


def test_fixed_span_blocks_with_a_finite_minus_infinity():
    """Exactly 0 weight beyond the span, yet a row whose in-span keys are all padding stays finite."""
    scorer = FixedSpanMask(16, 4, False, span=1)
    bias = scorer.bias(torch.zeros(1, 4, 5, 4), torch.arange(5), torch.arange(5), scale=1.0)  # [Tq, Tk]
    assert bias.shape == (5, 5) and torch.isfinite(bias).all()
    assert (bias[(torch.arange(5)[:, None] - torch.arange(5)).abs() <= 1] == 0).all()
    pad = torch.tensor([True, True, True, False, False])  # query 0 sees keys 0, 1: both pads
    probs = torch.softmax(bias + torch.randn(5, 5) + torch.zeros(5).masked_fill(pad, float("-inf")), dim=-1)
    assert torch.isfinite(probs).all()
    assert probs[3, 4] > 0 and probs[3, :2].eq(0).all()  # exp underflows to exactly 0 beyond the span


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("span", [1, 3])
def test_convolution_matches_formula(span, causal):
    torch.manual_seed(0)
    conv = ConvSelfAttention(16, 4, span, causal, dropout=0.0, bias=True).eval()
    x, pad = _random_inputs(seed=1)
    with torch.no_grad():
        fast = conv(x, key_padding_mask=pad, causal=causal)
        slow = slow_convolution(conv, x, pad)
    keep = ~pad
    assert torch.allclose(fast[keep], slow[keep], atol=1e-5), (fast - slow)[keep].abs().max()
    assert conv.kernel.shape == (4, span + 1 if causal else 2 * span + 1)


def test_convolution_ignores_left_padding_and_has_fewer_parameters_than_attention():
    torch.manual_seed(2)
    conv = ConvSelfAttention(16, 4, 2, causal=False).eval()
    x = torch.randn(1, 5, 16)
    padded = torch.cat([torch.randn(1, 3, 16), x], dim=1)
    pad = torch.tensor([[True] * 3 + [False] * 5])
    with torch.no_grad():
        assert torch.allclose(conv(x), conv(padded, key_padding_mask=pad)[:, 3:], atol=1e-6)
    n_conv = sum(p.numel() for p in conv.parameters())
    n_attn = sum(p.numel() for p in MultiheadAttention(16, 4).parameters())
    assert n_conv == 2 * 16 * 16 + 4 * 5 < n_attn == 4 * 16 * 16


def test_convolution_rejects_cross_attention_and_wrong_causality():
    conv = ConvSelfAttention(16, 4, 2, causal=True)
    x = torch.randn(1, 3, 16)
    with pytest.raises(ValueError, match="self-attention only"):
        conv(x, key_value=x, causal=True)
    with pytest.raises(ValueError, match="causal"):
        conv(x)


# ---- decoding -------------------------------------------------------------------------------------------------
def _model_inputs(model, B=3, S=9, T=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, len(model.encoder.dictionary), (B, S), generator=g)
    src[0, :6] = PAD  # deep left padding: pad queries whose whole span is padding
    src[1, :2] = PAD
    prev = torch.randint(4, len(model.decoder.dictionary), (B, T), generator=g)
    prev[:, 0] = 2
    return src, src.ne(PAD).sum(1), prev


@pytest.mark.parametrize("universal", [False, True])
@pytest.mark.parametrize("arch", NEW_ARCHS + ["sag_t5_transformer_flores"])
def test_step_by_step_equals_full_forward_with_beam_reordering(arch, universal):
    torch.manual_seed(0)
    model = build(arch, rel_span=2, universal=universal, **SMALL).eval()
    src, lengths, prev = _model_inputs(model)
    order = torch.tensor([2, 0, 0])  # a beam search step: reorder (and duplicate) the hypotheses
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        full = model.decoder(prev, enc)[0]  # [B, T, V]
        full_reordered = model.decoder(prev[order], model.encoder.reorder_encoder_out(enc, order))[0]
        assert torch.isfinite(full).all()
        state, steps = {}, []
        for t in range(prev.size(1)):
            if t == 3:  # from step 3 on, the batch is the reordered one
                model.decoder.reorder_incremental_state_scripting(state, order)
                enc, prev = model.encoder.reorder_encoder_out(enc, order), prev[order]
            steps.append(model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0])
    steps = torch.cat(steps, dim=1)
    assert (steps[:, :3] - full[:, :3]).abs().max() < 1e-4
    assert (steps[:, 3:] - full_reordered[:, 3:]).abs().max() < 1e-4


# ---- the gate -------------------------------------------------------------------------------------------------
class BranchRecorder(torch.nn.Module):
    """Stands in for a Sublayer: records the self-attention branch fn(x) and passes x through."""

    def forward(self, x, fn):
        self.branch = fn(x)
        return x


@pytest.mark.parametrize("beta0", [-1.0, 0.0, 2.5])
@pytest.mark.parametrize("decoder", [False, True])
def test_gate_scales_self_attention_by_sigmoid_beta0(decoder, beta0):
    torch.manual_seed(0)
    C, H = 16, 4
    self_attn = MultiheadAttention(C, H)
    cross = MultiheadAttention(C, H)

    def layer(gate):
        if decoder:
            lay = DecoderLayer(C, 32, self_attn, cross, 0.0, 0.0, False, gate=gate)
            lay.self_block = BranchRecorder()
        else:
            lay = EncoderLayer(C, 32, self_attn, 0.0, 0.0, False, gate=gate)
            lay.attn_block = BranchRecorder()
        return lay.eval()

    x = torch.randn(2, 5, C)
    enc, enc_pad = torch.randn(2, 4, C), torch.zeros(2, 4, dtype=torch.bool)
    branches = []
    for lay in (layer(None), layer(SelfAttentionGate(beta0))):
        with torch.no_grad():
            lay(x, enc, enc_pad) if decoder else lay(x, None)
        branches.append((lay.self_block if decoder else lay.attn_block).branch)
    ungated, gated_out = branches
    assert torch.equal(gated_out, ungated * torch.sigmoid(torch.tensor(beta0)))
    assert ungated.abs().max() > 0


@pytest.mark.parametrize("normalize_before", [False, True])
def test_gate_sits_before_dropout_and_residual(normalize_before):
    """Algorithm 1 (post-LN): LN(x + sigma(beta) attn(x)); pre-LN: x + sigma(beta) attn(LN(x))."""
    torch.manual_seed(0)
    attn = MultiheadAttention(16, 4)
    lay = EncoderLayer(16, 32, attn, 0.3, 0.0, normalize_before, gate=SelfAttentionGate(-1.0)).eval()
    lay.ffn_block = BranchRecorder()  # isolate the self-attention sublayer: its output is what reaches the FFN
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        out = lay(x, None)
        g = torch.sigmoid(torch.tensor(-1.0))
        norm = lay.attn_block.norm
        expected = x + g * attn(norm(x)) if normalize_before else norm(x + g * attn(x))
    assert torch.allclose(out, expected, atol=1e-6)


def test_gates_are_wired_per_layer_and_side():
    scan = build("sag_transformer")
    assert [lay.gate.beta.item() for lay in scan.encoder.stack.layers] == [-1.0] * 4
    assert [lay.gate.beta.item() for lay in scan.decoder.stack.layers] == [-1.0] * 4
    mt = build("sag_transformer_iwslt_de_en", **SMALL)
    assert {lay.gate.beta.item() for lay in mt.encoder.stack.layers} == {-1.0}
    assert {lay.gate.beta.item() for lay in mt.decoder.stack.layers} == {1.0}
    assert all(lay.gate is None for lay in build("chaabouni_transformer").encoder.stack.layers)
    only_dec = build("chaabouni_transformer", decoder_sag_init=0.5, **SMALL)
    assert only_dec.encoder.stack.layers[0].gate is None and only_dec.decoder.stack.layers[1].gate.beta.item() == 0.5
    uni = build("sag_transformer", universal=True, **SMALL)
    assert len(uni.encoder.stack.layers) == 1  # one beta shared by every depth
    # beta learns: the loss gradient reaches it
    src, lengths, prev = _model_inputs(mt)
    mt.decoder(prev, mt.encoder(src, lengths))[0].logsumexp(-1).sum().backward()
    assert all(lay.gate.beta.grad is not None and lay.gate.beta.grad != 0 for lay in mt.encoder.stack.layers)


def test_gate_needs_finite_beta0():
    with pytest.raises(ValueError, match="finite"):
        SelfAttentionGate(float("nan"))


# ---- parameters, presets, flags -------------------------------------------------------------------------------
def _n(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("universal", [False, True])
def test_parameter_counts(universal):
    span, heads = 3, 4
    kw = dict(SMALL, rel_span=span, universal=universal)
    n_layers = 2 if universal else SMALL["encoder_layers"] + SMALL["decoder_layers"]  # distinct layers
    base, sag = _n(build("chaabouni_transformer", **kw)), _n(build("sag_transformer", **kw))
    assert sag - base == n_layers  # one beta per (distinct) layer
    t5 = build("sag_t5_transformer", **kw)
    assert _n(t5) - sag == (2 * span + 1) * heads * n_layers
    for mod in t5.modules():
        if isinstance(mod, T5RelativeBias):
            assert _n(mod) == (2 * span + 1) * heads
    assert _n(build("sag_fixed_span_transformer", **kw)) == sag  # no parameters
    d, biases = SMALL["encoder_embed_dim"], 2 * SMALL["encoder_embed_dim"]  # conv: no W_q, W_k (and their biases)
    enc_kernel, dec_kernel = heads * (2 * span + 1), heads * (span + 1)
    n_enc, n_dec = (1, 1) if universal else (SMALL["encoder_layers"], SMALL["decoder_layers"])
    expected = sag - n_layers * (2 * d * d + biases) + n_enc * enc_kernel + n_dec * dec_kernel
    assert _n(build("sag_conv_transformer", **kw)) == expected


@pytest.mark.parametrize(
    "setup, size, beta0, dropout",
    [("scan", (256, 512, 8, 4), (-1.0, -1.0), 0.1),  # A.1 grid (see archs_chaabouni.py); beta_0 = -1
     ("iwslt_de_en", (512, 1024, 4, 6), (-1.0, 1.0), 0.3),  # A.2
     ("flores", (512, 2048, 2, 5), (-1.0, 1.0), 0.4),
     ("noun_adj", (1024, 4096, 16, 6), (-1.0, 1.0), 0.1)],
)
def test_presets_follow_appendix_a(setup, size, beta0, dropout):
    assert setup in SETUPS
    args = build(f"sag_t5_transformer_{setup}").encoder.args
    for side in ("encoder", "decoder"):
        assert tuple(getattr(args, f"{side}_{k}") for k in ("embed_dim", "ffn_embed_dim", "attention_heads", "layers")) == size
    assert (args.encoder_sag_init, args.decoder_sag_init) == beta0
    assert args.self_attn_pos == "t5" and args.rel_span == 4 and args.dropout == dropout
    assert bool(args.normalize_before) == (setup == "flores")  # A.2: pre-norm fixed for FLoRes only
    assert args.activation_dropout == (0.2 if setup == "flores" else 0.0)
    baseline = argparse.Namespace()
    ARCH_CONFIG_REGISTRY[f"chaabouni_transformer_{setup}"](baseline)  # the preset alone, no model
    assert (baseline.encoder_sag_init, baseline.decoder_sag_init, baseline.self_attn_pos) == (None, None, "none")


@pytest.mark.parametrize("bad", [0, -2, 2.5, True])
@pytest.mark.parametrize("arch", ["sag_t5_transformer", "sag_fixed_span_transformer", "sag_conv_transformer"])
def test_bad_span_is_a_value_error(arch, bad):
    with pytest.raises(ValueError, match="--rel-span"):
        build(arch, rel_span=bad, **SMALL)


def test_conv_with_a_position_scorer_is_a_value_error():
    with pytest.raises(ValueError, match="self-attn-type conv"):
        build("sag_conv_transformer", self_attn_pos="t5", **SMALL)


def test_flags_in_help():
    parser = argparse.ArgumentParser()
    CompgenTransformerModel.add_args(parser)
    text = parser.format_help()
    for flag in ("--rel-span", "--self-attn-type", "--encoder-sag-init", "--decoder-sag-init", "t5", "fixed_span"):
        assert flag in text
    args = parser.parse_args(["--self-attn-pos", "t5", "--rel-span", "6", "--encoder-sag-init", "-1"])
    assert (args.self_attn_pos, args.rel_span, args.encoder_sag_init, args.decoder_sag_init) == ("t5", 6, -1.0, None)


# ---- Figure 1 -------------------------------------------------------------------------------------------------
def test_plot_t5_biases_writes_a_png(tmp_path):
    torch.manual_seed(0)
    model = build("sag_t5_transformer", rel_span=2, **SMALL)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("scorer.relative_bias"):  # the [H, 2s+1] tables start at 0
                p.normal_()
    ckpt = tmp_path / "checkpoint_last.pt"
    torch.save({"model": model.state_dict(), "args": model.encoder.args}, ckpt)
    out = tmp_path / "t5.png"
    res = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "plot", "t5-biases", str(ckpt), "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "5 attention modules" in res.stdout  # 2 encoder + 3 decoder layers
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_plot_preferences_are_softmax_over_reachable_distances():
    from fairseq_compgen.pipelines import t5_biases as plot

    model = build("sag_t5_transformer", rel_span=2, **SMALL)
    biases = plot.relative_biases(model.state_dict())
    assert sorted(biases) == [("decoder", 0), ("decoder", 1), ("decoder", 2), ("encoder", 0), ("encoder", 1)]
    b = torch.randn(4, 5)
    labels, pref = plot.preferences(b, causal=False)
    assert labels == ["<=-2", "-1", "0", "1", ">=2"] and torch.allclose(pref, torch.softmax(b, -1))
    labels, pref = plot.preferences(b, causal=True)
    assert labels == ["<=-2", "-1", "0"] and torch.allclose(pref, torch.softmax(b[:, :3], -1))
    # the printed summary: each layer's gate, and each head's preferred distance among the reachable ones
    state = model.state_dict()
    state["decoder.stack.layers.1.gate.beta"].fill_(0.5)
    state["decoder.stack.layers.1.self_attn.scorer.relative_bias"].zero_()[2, 0] = 3.0  # head 2 prefers <=-2
    state["decoder.stack.layers.1.self_attn.scorer.relative_bias"][3, 4] = 9.0  # unreachable: head 3 stays uniform
    lines = plot.summary(state)
    assert [line.split(":")[0] for line in lines] == ["encoder layer 0", "encoder layer 1", "decoder layer 0",
                                                      "decoder layer 1", "decoder layer 2"]
    w = math.exp(3) / (math.exp(3) + 2)
    assert lines[3] == ("decoder layer 1: gate beta +0.500, sigmoid 0.622; heads' preferred distance: uniform: 0.33, "
                        f"uniform: 0.33, <=-2: {w:.2f}, uniform: 0.33")


def test_aggregate_t5_biases_keeps_the_plot_and_its_summary(tmp_path):
    """`aggregate --t5-biases`: per finished T5 run, the plot and, beside it, the printed gates and preferences."""
    from fairseq_compgen.pipelines import curves

    run = tmp_path / "run"
    run.mkdir()
    model = build("sag_t5_transformer", rel_span=2, **SMALL)
    torch.save({"model": model.state_dict()}, run / "checkpoint_last.pt")
    (run / "done.json").write_text("{}")
    runs = [{"dir": str(run), "arch": "sag_t5_transformer_scan", "dataset": "jump", "config": "sag_t5", "seed": 1}]
    (written,) = curves.plot_t5_biases(runs, tmp_path / "plots")
    assert written.name == "jump_sag_t5_seed1.png" and written.stat().st_size > 10_000
    summary = written.with_suffix(".txt").read_text().splitlines()
    assert len(summary) == 5 and summary[0].startswith("encoder layer 0: gate beta -1.000, sigmoid 0.269; ")


def test_plot_refuses_a_checkpoint_without_t5_biases(tmp_path):
    ckpt = tmp_path / "no_t5.pt"
    torch.save({"model": build("sag_fixed_span_transformer", **SMALL).state_dict()}, ckpt)
    res = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "plot", "t5-biases", str(ckpt), "-o",
                          str(tmp_path / "x.png")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and res.stderr == (f"fairseq_compgen: error: {ckpt}: no T5 relative biases found "
                                                  f"(expected a model trained with --self-attn-pos t5)\n")
    assert not (tmp_path / "x.png").exists()
    missing = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "plot", "t5-biases",
                              str(tmp_path / "nope.pt")], capture_output=True, text=True, timeout=120)
    assert (missing.returncode, missing.stderr) == (1, f"fairseq_compgen: error: no checkpoint at {tmp_path}/nope.pt\n")


@pytest.mark.parametrize("arch", NEW_ARCHS)
def test_training_step_reaches_every_parameter(arch):
    """Train mode (dropout on, incl. the convolution's weight dropout): every parameter gets a gradient, so
    distributed training needs no find_unused_parameters."""
    torch.manual_seed(0)
    model = build(arch, rel_span=2, attention_dropout=0.3, **SMALL).train()
    src, lengths, prev = _model_inputs(model)
    out = model(src, lengths, prev)[0]
    assert torch.isfinite(out).all()
    out.log_softmax(-1)[..., 4].sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, missing


def test_embedding_sharing_follows_appendix_a2():
    assert build("sag_t5_transformer_iwslt_de_en").decoder.output_weight is None  # A.2: tied decoder in/out
    assert build("sag_t5_transformer").decoder.output_weight is not None  # fairseq's default: untied
