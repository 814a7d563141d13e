"""Syntactic Attention (Russin et al. 2019, Section 2) against its equations, its decoding, and fairseq."""
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
