"""Syntactic Attention (Russin et al. 2019, Section 2) against its equations, its decoding, and fairseq."""
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fairseq_compgen.models.syntactic_attention import SyntacticAttentionModel, attend
from model_helpers import build, data_prep_script

REPO = Path(__file__).resolve().parents[1]
PAD, EOS, BOS = 1, 2, 0
SMALL = dict(semantic_dim=6, syntactic_dim=8)


def _batch(model, B=3, S=7, T=6, seed=0):
    """Left-padded sources ending with EOS, as fairseq batches them; row 0 has 3 pads."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, len(model.encoder.dictionary), (B, S), generator=g)
    src[:, -1] = EOS
    src[0, :3] = PAD
    prev = torch.randint(4, len(model.decoder.dictionary), (B, T), generator=g)
    prev[:, 0] = EOS
    return src, src.ne(PAD).sum(1), prev


def test_attention_readout_matches_loops():
    """Eqs. 3-5 written with explicit loops: alpha_ij = exp(s_i.h_j) / sum_k exp(s_i.h_k) over real positions,
    d_i = sum_j alpha_ij m_j, on the encoder's real outputs for a left-padded batch."""
    torch.manual_seed(0)
    model = build("syntactic_attention", **SMALL).eval()
    src, lengths, prev = _batch(model)
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        feats, extra = model.decoder(prev, enc, features_only=True)  # d_i [B, T, m]
    h, m = enc["encoder_out"][0], enc["semantic"][0]
    mask = enc["encoder_padding_mask"][0]
    assert mask.tolist()[0] == [False] * 5 + [True] * 3  # <SOS> + 4 real tokens, then the 3 pads (moved right)
    # the queries s_i: s_0 from the encoder, then the LSTM outputs, rebuilt step by step with explicit loops
    B, T = prev.shape
    for b in range(B):
        s = enc["init_query"][0][b]
        hc = (torch.zeros(1, s.numel()), torch.zeros(1, s.numel()))
        for i in range(T):
            real = [j for j in range(h.size(1)) if not mask[b, j]]
            e = [float(s @ h[b, j]) for j in real]
            z = sum(torch.exp(torch.tensor(x, dtype=torch.float64)) for x in e)
            alpha = [torch.exp(torch.tensor(x, dtype=torch.float64)) / z for x in e]
            d = sum(float(a) * m[b, j] for a, j in zip(alpha, real))
            c = sum(float(a) * h[b, j] for a, j in zip(alpha, real))
            assert torch.allclose(feats[b, i], d, atol=1e-5), (b, i)
            assert torch.allclose(extra["syntactic_attn"][0][b, i, real].double(), torch.stack(alpha), atol=1e-6)
            assert extra["syntactic_attn"][0][b, i, mask[b]].abs().sum() == 0  # no weight on padding
            with torch.no_grad():
                hc = model.decoder.cell(c[None], hc)
            s = hc[0][0]



# ---- the whole model against a direct, slow implementation of the paper's equations (float64) ---------------------
def _sigmoid(z):
    return 1.0 / (1.0 + torch.exp(-z))


def _lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One LSTM step, gates i, f, g, o (PyTorch's row order of the weights), written out."""
    z = w_ih @ x + b_ih + w_hh @ h + b_hh
    n = h.numel()
    i, f, g, o = _sigmoid(z[:n]), _sigmoid(z[n:2 * n]), torch.tanh(z[2 * n:3 * n]), _sigmoid(z[3 * n:])
    c = f * c + i * g
    return o * torch.tanh(c), c


def _bilstm_loops(lstm, xs):
    """A one-layer bidirectional LSTM over the list of vectors xs, one step at a time from zero states ->
    (fwd, bwd): fwd[j] after reading x_0 .. x_j, bwd[j] after reading x_{n-1} down to x_j."""
    n_hid = lstm.hidden_size
    out = {}
    for suffix, order in (("", range(len(xs))), ("_reverse", reversed(range(len(xs))))):
        w = [getattr(lstm, f"{name}_l0{suffix}").detach() for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        h = c = torch.zeros(n_hid, dtype=torch.float64)
        states = [None] * len(xs)
        for j in order:
            h, c = _lstm_step(xs[j], h, c, *w)
            states[j] = h
        out[suffix] = states
    return out[""], out["_reverse"]


def _paper_forward(model, words, steps, variant):
    """Russin et al. (2019) Eqs. 1-6 and their Table 2/3 variants for ONE sentence (batch 1, no padding, as the
    authors ran it), with the layout of the authors' code (B2.2 of the spec): x = <SOS> words (ending in <EOS>).
    Returns h [L, 2x], m [L, m], s0 [2x], alphas [T, L], logits [T, V]."""
    enc, dec = model.encoder, model.decoder
    x = [BOS] + words
    L = len(x)
    W_m, W_x = enc.semantic_embed.weight.detach(), enc.syntactic_embed.weight.detach()
    m = [W_m[t] for t in x]  # Eq. 1: m_j = W_m x_j (dropout off in eval mode)
    if variant.get("sequential_semantics"):  # Table 2: m_j = [->m_j ; <-m_j] from a biLSTM over the W_m x_j
        mf, mb = _bilstm_loops(enc.semantic_lstm, m)
        m = [torch.cat([mf[j], mb[j]]) for j in range(L)]
    e = [W_x[t] for t in x]
    f, b = _bilstm_loops(enc.lstm1, e)
    zero = torch.zeros(enc.lstm1.hidden_size, dtype=torch.float64)
    ctx = [torch.cat([f[j - 1] if j > 0 else zero, b[j + 1] if j + 1 < L else zero]) for j in range(L)]  # Eq. 2
    ctx[0], ctx[L - 1] = enc.sos_role.detach(), enc.eos_role.detach()  # the authors' <SOS>/<EOS> roles
    f2, b2 = _bilstm_loops(enc.lstm2, ctx)
    h = [torch.cat([f2[j], b2[j]]) for j in range(L)]
    W0, b0 = enc.init_query.weight.detach(), enc.init_query.bias.detach()
    s0 = torch.relu(W0 @ torch.cat([f2[L - 1], b2[0]]) + b0)  # s_0 from the final states [->h_L ; <-h_1]
    s = s0
    cell = dec.cell
    w_cell = [getattr(cell, n).detach() for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    W_out, b_out = dec.out.weight.detach(), dec.out.bias.detach()
    hd = cd = torch.zeros(s.numel(), dtype=torch.float64)  # the decoder LSTM's state starts at zero
    alphas, logits = [], []
    for _ in range(steps):
        scores = [float(s @ h[j]) for j in range(L)]  # Eq. 5: e_ij = s_i . h_j
        top = max(scores)
        z = sum(math.exp(v - top) for v in scores)
        alpha = [math.exp(v - top) / z for v in scores]  # Eq. 4
        d = sum(alpha[j] * m[j] for j in range(L))  # Eq. 3
        c = sum(alpha[j] * h[j] for j in range(L))  # Eq. 6
        feat = d
        if variant.get("syntax_action"):  # Table 2: f([d_i ; c_i])
            feat = torch.cat([d, c])
        if variant.get("nonlinear_semantics"):  # Table 3 / the authors' sem_mlp: Linear(ReLU(Linear(ReLU(d_i))))
            mlp = dec.semantic_mlp
            feat = torch.relu(mlp.weight.detach() @ torch.relu(d) + mlp.bias.detach())
        logits.append(W_out @ feat + b_out)
        alphas.append(torch.tensor(alpha, dtype=torch.float64))
        hd, cd = _lstm_step(c, hd, cd, *w_cell)  # Eq. 6: s_{i+1} = g(s_i, c_i)
        s = hd
    return torch.stack(h), torch.stack(m), s0, torch.stack(alphas), torch.stack(logits)


@pytest.mark.parametrize("variant", [{}, {"sequential_semantics": True}, {"syntax_action": True},
                                     {"nonlinear_semantics": True},
                                     {"sequential_semantics": True, "syntax_action": True}],
                         ids=["paper", "sequential_semantics", "syntax_action", "nonlinear_semantics",
                              "seq_sem+syn_act"])
def test_whole_model_matches_paper_equations_in_float64(variant):
    """Encoder and decoder against `_paper_forward` (explicit per-step LSTM gate equations, explicit shifts and
    concatenations, one sentence at a time), in float64: h_j, m_j, s_0, alpha_ij and the logits f(d_i), for a
    left-padded batch with rows of 4, 7 and 1 source tokens (the last: <SOS> <EOS> only, both roles)."""
    torch.manual_seed(0)
    model = build("syntactic_attention", **SMALL, **variant).double().eval()
    g = torch.Generator().manual_seed(1)
    V = len(model.encoder.dictionary)
    src = torch.randint(4, V, (3, 7), generator=g)
    src[:, -1] = EOS
    src[0, :3] = PAD
    src[2, :6] = PAD
    lengths = src.ne(PAD).sum(1)
    T = 5
    prev = torch.full((3, T), EOS)  # only its length matters (Eq. 6)
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        logits, extra = model(src, lengths, prev)
    assert logits.dtype == torch.float64
    for b in range(3):
        words = [t for t in src[b].tolist() if t != PAD]
        h, m, s0, alpha, ref_logits = _paper_forward(model, words, T, variant)
        L = h.size(0)
        assert enc["encoder_padding_mask"][0][b].tolist() == [False] * L + [True] * (8 - L)
        assert (enc["encoder_out"][0][b, :L] - h).abs().max() < 1e-9, b
        assert (enc["semantic"][0][b, :L] - m).abs().max() < 1e-9, b
        assert (enc["init_query"][0][b] - s0).abs().max() < 1e-9, b
        # alpha goes through a float32 softmax in `attend`, hence 1e-6 from here on
        assert (extra["syntactic_attn"][0][b, :, :L] - alpha).abs().max() < 1e-6, b
        assert (logits[b] - ref_logits).abs().max() < 1e-6, b
    assert float(enc["init_query"][0].abs().sum()) > 0.1  # s_0 is not all zero (the ReLU leaves some units on)


def test_attend_function_on_random_tensors():
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 5), torch.randn(2, 4, 5), torch.randn(2, 4, 3)
    mask = torch.tensor([[False] * 4, [False, False, True, True]])
    alpha, d = attend(q, k, v, mask)
    for b in range(2):
        n = int((~mask[b]).sum())
        w = torch.softmax(torch.stack([q[b] @ k[b, j] for j in range(n)]), 0)
        assert torch.allclose(alpha[b, :n], w) and torch.allclose(d[b], sum(w[j] * v[b, j] for j in range(n)))


@pytest.mark.parametrize("variant", [{}, {"sequential_semantics": True}, {"syntax_action": True},
                                     {"nonlinear_semantics": True}])
def test_step_by_step_equals_full_forward(variant):
    torch.manual_seed(0)
    model = build("syntactic_attention", **SMALL, **variant).eval()
    src, lengths, prev = _batch(model)
    with torch.no_grad():
        full, _ = model(src, lengths, prev)
        enc = model.encoder(src, lengths)
        state = {}
        steps = [model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0] for t in range(prev.size(1))]
    assert (torch.cat(steps, 1) - full).abs().max() < 1e-5


def test_reorder_incremental_state_follows_beams():
    torch.manual_seed(0)
    model = build("syntactic_attention", **SMALL).eval()
    src, lengths, prev = _batch(model)
    order = torch.tensor([2, 0, 0])
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        state = {}
        model.decoder(prev[:, :1], enc, incremental_state=state)
        model.decoder.reorder_incremental_state_scripting(state, order)
        enc2 = model.encoder.reorder_encoder_out(enc, order)
        step2 = model.decoder(prev[order, :2], enc2, incremental_state=state)[0]
        full = model(src, lengths, prev[:, :2])[0][order, 1:2]
    assert torch.allclose(step2, full, atol=1e-5)


def test_left_padding_does_not_change_a_sentence():
    torch.manual_seed(0)
    model = build("syntactic_attention", **SMALL).eval()
    src, lengths, prev = _batch(model)  # row 0 is left-padded by 3
    with torch.no_grad():
        batched, _ = model(src, lengths, prev)
        alone, _ = model(src[:1, 3:], lengths[:1], prev[:1])
        right = torch.cat([src[:1, 3:], src.new_full((1, 3), PAD)], 1)  # right padding gives the same too
        right_out, _ = model(right, lengths[:1], prev[:1])
    assert torch.allclose(batched[0], alone[0], atol=1e-5)
    assert torch.allclose(right_out[0], alone[0], atol=1e-5)


def test_decoder_ignores_previous_tokens():
    """Eq. 6: the decoder is driven by attention only, so greedy decoding to the first EOS gives the verdict of
    the authors' gold-length evaluation."""
    torch.manual_seed(0)
    model = build("syntactic_attention", **SMALL).eval()
    src, lengths, prev = _batch(model)
    other = prev.clone()
    other[:, 1:] = torch.randint(4, len(model.decoder.dictionary), other[:, 1:].shape)
    with torch.no_grad():
        assert torch.equal(model(src, lengths, prev)[0], model(src, lengths, other)[0])


def test_paper_sizes():
    """B2.2: m 120, syntactic embedding 100, biLSTM 100+100, roles 2x200, biLSTM 200+200, s_0 Linear(400, 400),
    decoder LSTM 400 -> 400, readout Linear(120, V_out). Vocabularies of 13 + 4 and 6 + 4 fairseq symbols."""
    model = build("syntactic_attention_scan", src_words=13, tgt_words=6)
    V_in, V_out = 17, 10

    def lstm(i, h, dirs):
        return dirs * (4 * h * (i + h) + 8 * h)

    expected = (V_in * 120 + V_in * 100 + lstm(100, 100, 2) + 2 * 200 + lstm(200, 200, 2) + 400 * 400 + 400
                + lstm(400, 400, 1) + 120 * V_out + V_out)
    assert sum(p.numel() for p in model.parameters()) == expected
    assert abs(expected - 2.25e6) / 2.25e6 < 0.02  # the authors' default configuration: about 2.25M
    assert model.encoder.dropout.p == 0.5


def test_flags_in_help_and_presets_only_default():
    import argparse

    parser = argparse.ArgumentParser()
    SyntacticAttentionModel.add_args(parser)
    text = parser.format_help()
    for flag in ("--semantic-dim", "--syntactic-dim", "--sequential-semantics", "--syntax-action",
                 "--nonlinear-semantics", "Russin"):
        assert flag in text
    model = build("syntactic_attention_scan", semantic_dim=10, dropout=0.1)
    assert model.encoder.semantic_embed.embedding_dim == 10 and model.encoder.dropout.p == 0.1


# ---- end to end: fairseq-compgen prep scan -> fairseq-train -> fairseq-generate -----------------------------------------
def _bin(name):
    return str(Path(sys.executable).parent / name)


def test_train_and_generate_on_tiny_scan(tmp_path):
    prep = data_prep_script("scan")  # a copy of its own: build_split is replaced below
    full_build = prep.module.build_split

    def small_build(name, scan_dir=None):  # the add-jump split, every 60th train and every 250th test line
        data = full_build(name, scan_dir=scan_dir)
        return {"train": data["train"][::60], "test": data["test"][::250]}

    prep.module.build_split = small_build
    prep.main(["--split", "addprim_jump", "--out", str(tmp_path / "scan"), "--no-count-check"])  # a sample
    data = tmp_path / "scan" / "addprim_jump" / "bin"
    n_test = len(full_build("addprim_jump")["test"][::250])
    env = dict(os.environ, OMP_NUM_THREADS="1")
    user_dir = str(REPO / "fairseq_compgen")
    train = subprocess.run(
        [_bin("fairseq-train"), str(data), "--user-dir", user_dir, "--task", "compgen", "--arch",
         "syntactic_attention_scan", "--semantic-dim", "8", "--syntactic-dim", "8", "--cpu",
         "--optimizer", "adam", "--lr", "1e-3", "--clip-norm", "5", "--batch-size", "32", "--max-epoch", "1",
         "--required-batch-size-multiple", "1", "--valid-subset", "test", "--eval-oracle-length",
         "--save-dir", str(tmp_path / "ckpt"), "--no-epoch-checkpoints", "--log-format", "simple",
         "--num-workers", "0", "--seed", "1"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert train.returncode == 0, train.stderr[-3000:]
    log = train.stdout + train.stderr
    assert re.search(r"valid on 'test' subset .*accuracy .*oracle_accuracy", log), log[-2000:]
    gen = subprocess.run(
        [_bin("fairseq-generate"), str(data), "--user-dir", user_dir, "--task", "compgen", "--cpu",
         "--path", str(tmp_path / "ckpt" / "checkpoint_last.pt"), "--gen-subset", "test", "--beam", "1",
         "--batch-size", "16", "--required-batch-size-multiple", "1", "--max-len-a", "0", "--max-len-b", "50"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert gen.returncode == 0, gen.stderr[-3000:]
    ids = [int(line.split("\t")[0][2:]) for line in gen.stdout.splitlines() if line.startswith("H-")]
    assert sorted(ids) == list(range(n_test))
