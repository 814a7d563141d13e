"""Ontañón et al. (2022): relative labels, copy decoder, presets and Table 11, algorithmic tasks, tf_accuracy."""
import math

import pytest
import torch
import torch.nn.functional as F

from fairseq_compgen.data import algorithmic
from fairseq_compgen.models.archs_ontanon import CONFIGS, arch_name
from fairseq_compgen.modules.attention import MultiheadAttention
from fairseq_compgen.modules.position_scorer import SCORERS
from fairseq_compgen.tasks.greedy import teacher_forced_exact_match
from model_helpers import build, data_prep_script

PAD, EOS = 1, 2
R = 16


def _attn(kind, C=16, H=2, cross=False, seed=0):
    torch.manual_seed(seed)
    scorer = SCORERS[kind](embed_dim=C, num_heads=H, causal=False) if kind else None
    return MultiheadAttention(C, H, bias=True, scorer=scorer, key_positions_from_padding=cross).eval()


def slow_attention(attn, x, kv, pad, causal, k_offsets, constant_label=False):
    """Ontañón et al. (2022) §4.1 with loops: e_ij = (q_i.k_j + q_i.r_c + b_c)/sqrt(d_h), c = clip(j' - i, -16, 16) + 16,
    j' = j - k_offsets[b] (the key's position from the first real token)."""
    B, Tq, C = x.shape
    Tk = kv.size(1)
    H, dh = attn.num_heads, attn.head_dim
    sc = attn.scorer
    q = attn.q_proj(x).view(B, Tq, H, dh).double()
    k = attn.k_proj(kv).view(B, Tk, H, dh).double()
    v = attn.v_proj(kv).view(B, Tk, H, dh).double()
    out = torch.zeros(B, Tq, H, dh, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(Tq):
                logits = []
                for j in range(Tk):
                    c = R if constant_label else max(-R, min(R, (j - int(k_offsets[b])) - i)) + R
                    e = q[b, i, h] @ k[b, j, h]
                    if sc is not None and sc.rel_embedding is not None:
                        e = e + q[b, i, h] @ sc.rel_embedding[c].double()
                    if sc is not None and sc.rel_bias is not None:
                        e = e + sc.rel_bias[c].double()
                    blocked = bool(pad[b, j]) or (causal and j > i)
                    logits.append(float("-inf") if blocked else float(e) / math.sqrt(dh))
                w = torch.softmax(torch.tensor(logits, dtype=torch.float64), 0)
                out[b, i, h] = sum(w[j] * v[b, j, h] for j in range(Tk))
    return attn.out_proj(out.view(B, Tq, C).float())


@pytest.mark.parametrize("kind", ["rel-e", "rel-b", "rel-eb"])
@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_labels_match_formula(kind, causal):
    attn = _attn(kind)
    T = 22  # distances up to 21: the clip at 16 is exercised
    x = torch.randn(2, T, 16)
    pad = torch.zeros(2, T, dtype=torch.bool)
    if not causal:
        pad[1, :3] = True  # left-padded encoder keys (relative distances are unchanged by the shift)
    with torch.no_grad():
        fast = attn(x, key_padding_mask=pad, causal=causal)
        slow = slow_attention(attn, x, x, pad, causal, k_offsets=[0, 0])
    keep = ~pad
    assert torch.allclose(fast[keep], slow[keep], atol=1e-5), (fast - slow)[keep].abs().max()


@pytest.mark.parametrize("kind", ["rel-e", "rel-b", "rel-eb"])
def test_rel2_cross_attention_counts_source_positions_from_first_real_token(kind):
    attn = _attn(kind, cross=True)
    Tq, S = 20, 24
    x, enc = torch.randn(2, Tq, 16), torch.randn(2, S, 16)
    pad = torch.zeros(2, S, dtype=torch.bool)
    pad[1, :5] = True  # example 1: source left-padded by 5
    with torch.no_grad():
        fast = attn(x, enc, key_padding_mask=pad)
        slow = slow_attention(attn, x, enc, pad, False, k_offsets=[0, 5])
        unpadded = attn(x[1:], enc[1:, 5:])  # the same example without its padding
    assert torch.allclose(fast, slow, atol=1e-5), (fast - slow).abs().max()
    assert torch.allclose(fast[1:], unpadded, atol=1e-5)


def test_rel2_cross_attention_step_by_step():
    """Decoding one query at a time, the cross-attention must know the query's step (kept in its cache)."""
    attn = _attn("rel-eb", cross=True)
    x, enc = torch.randn(2, 19, 16), torch.randn(2, 7, 16)
    pad = torch.tensor([[True, True, False, False, False, False, False], [False] * 7])
    with torch.no_grad():
        full = attn(x, enc, key_padding_mask=pad)
        state = {}
        steps = [attn(x[:, t:t + 1], enc, key_padding_mask=pad, incremental_state=state) for t in range(19)]
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)


@pytest.mark.parametrize("kind", ["rel0-e", "rel0-b", "rel0-eb"])
def test_rel0_cross_attention_has_parameters_but_no_effect(kind):
    attn = _attn(kind, cross=True)
    plain = _attn(None, cross=True)
    plain.load_state_dict({k: v for k, v in attn.state_dict().items() if not k.startswith("scorer.")})
    x, enc = torch.randn(2, 5, 16), torch.randn(2, 30, 16)
    pad = torch.zeros(2, 30, dtype=torch.bool)
    pad[0, :4] = True
    with torch.no_grad():
        a, b = attn(x, enc, key_padding_mask=pad), plain(x, enc, key_padding_mask=pad)
        slow = slow_attention(attn, x, enc, pad, False, k_offsets=[4, 0], constant_label=True)
    assert torch.allclose(a, b, atol=1e-5) and torch.allclose(a, slow, atol=1e-5)
    assert sum(p.numel() for p in attn.scorer.parameters()) > 0


def test_radius_flag():
    sc = SCORERS["rel-eb"](embed_dim=16, num_heads=2, causal=False, radius=3)
    assert sc.rel_embedding.shape == (7, 8) and sc.rel_bias.shape == (7,)


# ---- copy decoder --------------------------------------------------------------------------------------------

def _copy_inputs(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    V = len(model.decoder.dictionary)
    src = torch.randint(4, V, (3, 7), generator=g)
    src[0, :3] = PAD
    prev = torch.randint(4, V, (3, 5), generator=g)
    prev[:, 0] = EOS
    return src, src.ne(PAD).sum(1), prev


def test_copy_decoder_matches_direct_computation():
    torch.manual_seed(0)
    model = build("ontanon_rel2_eb_c").eval()
    dec = model.decoder
    with torch.no_grad():  # a non-trivial gate
        dec.copy.gate.bias.fill_(0.3)
    src, lengths, prev = _copy_inputs(model)
    with torch.no_grad():
        lprobs, _ = model(src, lengths, prev)
        probs = model.get_normalized_probs((lprobs, None), log_probs=False)
        enc = model.encoder(src, lengths)
        y, _ = dec.extract_features(prev, enc)
        H = enc["encoder_out"][0]
        p1 = F.softmax(dec.output_layer(y), -1)
    B, T, V = probs.shape
    d = y.size(-1)
    assert torch.allclose(probs.sum(-1), torch.ones(B, T), atol=1e-5)
    for b in range(B):
        for t in range(T):
            qv = dec.copy.query.weight @ y[b, t] + dec.copy.query.bias
            scores = [float(qv @ H[b, j]) / math.sqrt(d) if src[b, j] != PAD else float("-inf") for j in range(7)]
            a = torch.softmax(torch.tensor(scores), 0)
            p2 = torch.zeros(V)
            for j in range(7):
                p2[src[b, j]] += a[j]
            assert p2[PAD] == 0  # padding gets no copy mass
            w = torch.sigmoid(dec.copy.gate.weight[0] @ y[b, t] + dec.copy.gate.bias[0])
            expected = (1 - w) * p1[b, t] + w * p2
            assert torch.allclose(probs[b, t], expected, atol=1e-5)


def test_copy_decoder_masks_padding_and_trains():
    torch.manual_seed(0)
    model = build("ontanon_abs_c")
    src, lengths, prev = _copy_inputs(model)
    lprobs, _ = model(src, lengths, prev)
    enc = model.encoder(src, lengths)
    y, _ = model.decoder.extract_features(prev, enc)
    a = model.decoder.copy.attention(y, enc["encoder_out"][0], enc["encoder_padding_mask"][0])
    assert (a[0, :, :3] == 0).all()
    loss = F.nll_loss(lprobs.view(-1, lprobs.size(-1)), prev.roll(-1, 1).reshape(-1))
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_copy_decoder_needs_joined_dictionary():
    with pytest.raises(ValueError, match="joined dictionary"):
        build("ontanon_rel2_eb_c", joined=False)


def test_copy_decoder_step_by_step_equals_full_forward():
    torch.manual_seed(0)
    model = build("ontanon_small_4s").eval()
    src, lengths, prev = _copy_inputs(model)
    with torch.no_grad():
        full, _ = model(src, lengths, prev)
        enc, state = model.encoder(src, lengths), {}
        steps = [model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0] for t in range(prev.size(1))]
    assert (torch.cat(steps, 1) - full).abs().max() < 1e-4


# ---- presets and Table 11 ------------------------------------------------------------------------------------

def formula(V, d, f, layers, pos, copy, shared, h):
    """App. C, Table 11's parameter counts."""
    dh = d // h
    rel = {"abs": 0, "e": 33 * dh, "b": 33, "eb": 33 * dh + 33}["abs" if pos == "abs" else pos.split("-")[1]]
    A, Ff = 4 * (d * d + d), (d * f + f) + (f * d + d)
    enc, dec = A + rel + Ff + 4 * d, 2 * (A + rel) + Ff + 6 * d
    n = 1 if shared else layers
    return 2 * V * d + n * (enc + dec) + d * V + V + ((d * d + d) + (d + 1) if copy else 0)


@pytest.mark.parametrize("row, V, table11", [
    ("abs", 14, 236e3), ("rel-e", 14, 239e3), ("rel-b", 14, 236e3), ("rel2-eb", 14, 239e3), ("abs-c", 14, 241e3),
    ("rel-eb-c", 16, 244e3), ("rel2-eb-c", 14, 243e3), ("small-4", 14, 480e3), ("small-6", 24, 719e3),
    ("large-2-code", 14, 1.88e6), ("large-4", 14, 1.88e6), ("large-6", 14, 2.81e6), ("small-2s", 14, 125e3),
    ("large-2s", 14, 486e3), ("large-6s", 106, 521e3), ("abs", 876, 402e3), ("rel2-eb-c", 876, 410e3),
    ("large-4s", 876, 818e3), ("rel-b", 106, 254e3), ("small-6s", 184, 158e3),
])
def test_parameter_counts_match_table11(row, V, table11):
    model = build(arch_name(row), src_words=V - 4, tgt_words=V - 4)  # fairseq's 4 specials: len(dict) == V
    n = sum(p.numel() for p in model.parameters())
    pos, copy, (d, f, h), layers, shared = CONFIGS[row]
    assert n == formula(V, d, f, layers, pos, copy, shared, h)
    assert abs(n - table11) <= (1e3 if table11 < 1e6 else 5e3), f"{row}, V={V}: {n} vs Table 11's {table11}"


def test_spec_examples_and_large_2():
    counts = {r: sum(p.numel() for p in build(arch_name(r), src_words=10, tgt_words=10).parameters())
              for r in ("rel2-eb-c", "abs", "large-2")}
    assert counts["rel2-eb-c"] == 243_765 and counts["abs"] == 236_174
    assert round(counts["large-2"] / 100) == 9511  # a true 2-layer large model, 951.1k (Table 11's 1.88m is the code's 4 layers)


def test_preset_mechanisms():
    a = build("ontanon_rel_eb_c").encoder.args
    assert (a.self_attn_pos, a.cross_attn_pos, a.copy_decoder, a.absolute_positions) == ("rel-eb", "rel0-eb", True, "none")
    a = build("ontanon_rel2_b").encoder.args
    assert (a.self_attn_pos, a.cross_attn_pos, a.copy_decoder) == ("rel-b", "rel-b", False)
    m = build("ontanon_large_6s")
    assert len(m.encoder.stack.layers) == 1 and m.encoder.stack.num_layers == 6 and m.encoder.args.encoder_embed_dim == 128
    assert len(CONFIGS) == 23  # Tables 8-11's 22 rows + the code's 4-layer large-2


# ---- algorithmic tasks --------------------------------------------------------------------------------------

def _num(tokens):
    s = "".join(t for t in tokens if t not in ("#",))
    if s in ("", "-"):
        return 0
    return int(s)


def _lengths(task, subset):
    return algorithmic.LENGTHS[task][1 if subset == "test" else 0]


@pytest.mark.parametrize("task", algorithmic.TASKS)
def test_generators(task):
    data = algorithmic.make_task(task, seed=3, train_size=3000, test_size=400)
    assert {k: len(v) for k, v in data.items()} == {"train": 3000, "valid": 400, "test": 400}
    assert data == algorithmic.make_task(task, seed=3, train_size=3000, test_size=400)  # deterministic
    assert data["train"] != algorithmic.make_task(task, seed=4, train_size=3000, test_size=400)["train"]
    vocab = set()
    for subset, examples in data.items():
        lo, hi = _lengths(task, subset)
        for src, tgt in examples:
            s, t = src.split(), tgt.split()
            vocab |= set(s) | set(t)
            if task in ("add", "addneg"):
                a, b = " ".join(s).split(" [SEP] ")
                a, b = a.split(), b.split()
                assert len(a) == len(b) == len(t) == 12
                for op in (a, b):
                    if task == "addneg":  # "#" padding: the operand's digits are visible
                        assert lo <= sum(x.isdigit() for x in op) <= hi
                    else:  # "0" padding: at most `hi` digits
                        assert op[: 12 - hi] == ["0"] * (12 - hi)
                assert _num(t) == _num(a) + _num(b)
                if task == "add":
                    assert t == list(str(int("".join(a)) + int("".join(b))).zfill(12))
            elif task == "reverse":
                assert lo <= len(s) <= hi and t == s[::-1]
            elif task == "dup":
                assert lo <= len(s) <= hi and t == s + s
            elif task == "cart":
                i = s.index("[SEP]")
                s1, s2 = s[:i], s[i + 1:]
                assert lo <= len(s1) <= hi and lo <= len(s2) <= hi
                assert set(s1) <= set(algorithmic.DIGITS) and set(s2) <= set(algorithmic.LETTERS)
                assert t == [x for a in s1 for b in s2 for x in (a, b, "[SEP]")]
            elif task == "inters":
                i = s.index("[SEP]")
                s1, s2 = s[:i], s[i + 1:]
                assert len(set(s1)) == len(s1) <= hi and len(set(s2)) == len(s2) and lo <= len(s2) <= hi
                assert t == [("true" if set(s1) & set(s2) else "false")]
    assert vocab == algorithmic.VOCAB[task] or task in ("reverse", "dup")  # [SEP] unused there
    assert vocab | {"[SEP]"} == algorithmic.VOCAB[task]
    assert len(algorithmic.VOCAB[task]) + 3 == algorithmic.TABLE7_VOCAB[task]  # + [PAD] [START] [END]
    if task == "inters":
        labels = [t for _, t in data["train"]]
        assert labels.count("true") == labels.count("false")
    if task == "addneg":
        assert any(s.split()[0] == "#" and "-" in s for s, _ in data["train"])


def test_data_prep_command(tmp_path):
    mod = data_prep_script("algorithmic")
    mod.main(["--out", str(tmp_path), "--tasks", "dup", "cart", "--train-size", "50", "--test-size", "8",
              "--no-binarize"])
    for task in ("dup", "cart"):
        lines = (tmp_path / task / "train.src").read_text().splitlines()
        assert len(lines) == 50 and len((tmp_path / task / "test.tgt").read_text().splitlines()) == 8
        assert list(zip(lines, (tmp_path / task / "train.tgt").read_text().splitlines())) == \
            algorithmic.make_task(task, 0, 50, 8)["train"]


# ---- tf_accuracy --------------------------------------------------------------------------------------------

class _FixedOutput(torch.nn.Module):
    def __init__(self, pred, V=9):
        super().__init__()
        self.logits = F.one_hot(pred, V).float()

    def forward(self, **kwargs):
        return self.logits, None


def test_tf_accuracy_cuts_at_first_eos():
    target = torch.tensor([[5, 6, EOS, PAD], [5, 6, 7, EOS], [5, EOS, PAD, PAD], [5, 6, EOS, PAD]])
    pred = torch.tensor([[5, 6, EOS, 8],  # garbage after EOS: correct
                         [5, 6, EOS, EOS],  # stops early: wrong
                         [5, 7, PAD, PAD],  # wrong token: wrong
                         [5, 6, 7, EOS]])  # does not stop: wrong
    sample = {"target": target, "net_input": {}}
    got = teacher_forced_exact_match(_FixedOutput(pred), sample, PAD, EOS)
    assert got.tolist() == [True, False, False, False]
