"""The position encodings of modules/positions/: the registry and its generated flags, and every encoding against a
slow, direct implementation of its paper's formula (at plain and at randomized positions) and against step-by-step
decoding."""
import argparse
import math
import re

import pytest
import torch

from fairseq_compgen.errors import UsageError
from fairseq_compgen.models.compgen_transformer import CompgenTransformerModel
from fairseq_compgen.modules.attention import MultiheadAttention
from fairseq_compgen.modules.positions import DECODER_SELF, ENCODER_SELF, ENCODINGS, build_attention_position
from fairseq_compgen.modules.positions import registry
from fairseq_compgen.modules.positions.cope import ContextualPositions
from model_helpers import build

PAD = 1
NEW_PRESETS = ["nope_transformer_scan", "learned_transformer_scan", "alibi_transformer_scan",
               "rope_transformer_scan", "xpos_transformer_scan", "fire_transformer_scan", "cope_transformer_scan",
               "random_rope_transformer_scan"]


def _parser():
    p = argparse.ArgumentParser()
    CompgenTransformerModel.add_args(p)
    return p


# ---- registry -----------------------------------------------------------------------------------------------
def test_every_encoding_has_a_paper_help_and_a_flag_choice():
    p = _parser()
    acts = {a.dest: a for a in p._actions}
    for name, e in ENCODINGS.items():
        assert e.paper and e.help, name
        flags = [dest for dest, (sites, _, _) in registry.SITE_FLAGS.items() if set(sites) & e.sites]
        assert flags, name
        for dest in flags:
            assert name in acts[dest].choices, (name, dest)
        for o in e.options:
            assert acts[o.dest].default is None and o.dest in registry.defaults(), o.flag


def test_help_lists_every_encoding_with_its_paper(capsys):
    from fairseq_compgen import help as help_cmd

    help_cmd.main([])
    out = capsys.readouterr().out
    for name, e in ENCODINGS.items():
        assert any(line.split()[:1] == [name] and e.paper in line for line in out.splitlines()), name


def test_encoding_refused_where_it_cannot_act():
    with pytest.raises(UsageError, match="xpos.*cannot act in encoder-self.*--encoder-self-attn-pos"):
        build("rope_transformer_scan", self_attn_pos="xpos", encoder_self_attn_pos=None, decoder_self_attn_pos=None)
    with pytest.raises(UsageError, match="alibi.*cannot act in cross"):
        build("compgen_transformer", cross_attn_pos="alibi")


@pytest.mark.parametrize("pos", ["rope", "alibi"])
def test_linear_and_conv_refuse_position_encodings(pos):
    with pytest.raises(UsageError, match="linear takes no self-attention position encoding"):
        build("linear_uni_transformer_scan", self_attn_pos=pos)
    with pytest.raises(UsageError, match="conv replaces self-attention"):
        build("sag_conv_transformer_scan", self_attn_pos=pos)


def test_options_reach_the_module_and_defaults_apply():
    m = build("rope_transformer_scan", rope_theta=100.0)
    sc = m.encoder.stack.layers[0].self_attn.scorer
    assert sc.inv_freq[1].item() == pytest.approx(100.0 ** (-2 / 16))
    assert build("alibi_transformer_scan").encoder.args.rel_span == 4


# ---- slow references ----------------------------------------------------------------------------------------
def slow_attention(attn, x, pad, causal, logit_fn, positions=None):
    """Softmax attention written with loops over b, h, i, j; logit_fn(q_i, k_j, h, p_i, p_j, ctx) -> the logit
    (float), p the positions of the tokens i and j: plain, the r-th real token of an example (after its left padding)
    is at r; randomized (a sorted sample), the token in column c is at positions[c], whatever the padding
    (positions/randomized.py); ctx = dict(b=, q=[T, dh] and k=[T, dh] of head h in example b, pad=[T], last=the
    position of the example's last token)."""
    B, T, C = x.shape
    H, dh = attn.num_heads, attn.head_dim
    q = attn.q_proj(x).view(B, T, H, dh).double()
    k = attn.k_proj(x).view(B, T, H, dh).double()
    v = attn.v_proj(x).view(B, T, H, dh).double()
    out = torch.zeros(B, T, H, dh, dtype=torch.float64)
    for b in range(B):
        first = int(pad[b].long().sum())  # left padding
        at = [i - first if positions is None else int(positions[i]) for i in range(T)]  # plain pads: < 0, masked
        for h in range(H):
            for i in range(T):
                ctx = dict(b=b, q=q[b, :, h], k=k[b, :, h], pad=pad[b], last=at[-1])
                logits = [float("-inf") if bool(pad[b, j]) or (causal and j > i)
                          else logit_fn(q[b, i, h], k[b, j, h], h, at[i], at[j], ctx) for j in range(T)]
                w = torch.softmax(torch.tensor(logits, dtype=torch.float64), 0)
                out[b, i, h] = sum(w[j] * v[b, j, h] for j in range(T))
    return attn.out_proj(out.view(B, T, C).float())


def rotate_slow(x, p, theta=10000.0):
    """RoFormer Eq. 34: each pair (x_2k, x_2k+1) rotated by p * theta^(-2k/d)."""
    d = x.numel()
    y = x.clone()
    for kk in range(d // 2):
        a = p * theta ** (-2 * kk / d)
        y[2 * kk] = x[2 * kk] * math.cos(a) - x[2 * kk + 1] * math.sin(a)
        y[2 * kk + 1] = x[2 * kk] * math.sin(a) + x[2 * kk + 1] * math.cos(a)
    return y


def alibi_logit(H):
    def f(q, k, h, i, j, ctx):
        m = 2 ** (-8 * (h + 1) / H)  # Press et al. §3: the slopes 2^(-8/H), 2^(-16/H), ...
        return float(q @ k) / math.sqrt(q.numel()) - m * abs(i - j)
    return f


def rope_logit(q, k, h, i, j, ctx):
    return float(rotate_slow(q, i) @ rotate_slow(k, j)) / math.sqrt(q.numel())


def xpos_logit(q, k, h, i, j, ctx):
    d = q.numel()
    zeta = torch.tensor([(2 * kk / d + 0.4) / 1.4 for kk in range(d // 2) for _ in (0, 1)], dtype=torch.float64)
    return float((rotate_slow(q, i) * zeta ** (i / 512)) @ (rotate_slow(k, j) * zeta ** (-j / 512))) / math.sqrt(d)


def fire_logit(causal):
    """Li et al. §3 and the paper's listing: b_h(i, j) = MLP(psi(i - j) / (psi(max(L, i)) + 1e-6))_h, psi(x) =
    log(c x + 1), MLP = Linear(1, hidden), ReLU, Linear(hidden, H), L = |m| L0; positions from 0. In the encoder (our
    symmetric form) |i - j| / psi(max(L, n - 1)), positions counted from the first real token, n - 1 the last real
    token's (ctx["last"]: its sampled position with randomized positions)."""
    def f(q, k, h, i, j, ctx):
        sc = ctx["attn"].scorer
        c = math.exp(float(sc.log_c))
        L = abs(float(sc.threshold_scale) * float(sc.threshold_base))
        psi = lambda x: math.log(c * x + 1)  # noqa: E731
        x = psi(i - j) / (psi(max(L, i)) + 1e-6) if causal else psi(abs(i - j)) / (psi(max(L, ctx["last"])) + 1e-6)
        hidden = torch.relu(sc.mlp_in.weight[:, 0].double() * x + sc.mlp_in.bias.double())
        b = float(sc.mlp_out.weight[h].double() @ hidden + sc.mlp_out.bias[h])
        return float(q @ k) / math.sqrt(q.numel()) + b
    return f


def cope_logit(q, k, h, i, j, ctx):
    """Golovneva et al. §3 with the scaling of the paper's listing: g_it = sigmoid(q_i.k_t / sqrt(d_head)),
    p_ij = sum_{t=j..i} g_it (clipped at P-1), e[p] interpolated between e[floor p] and e[ceil p],
    logit = q_i.k_j / sqrt(d_head) + q_i.e[p_ij] (the position term unscaled). Its positions come from the content:
    i and j are the token indices here (plain positions, no padding)."""
    e = ctx["attn"].scorer.embedding.double()  # [P, dh]
    d = q.numel()
    p = sum(torch.sigmoid(q @ ctx["k"][t] / math.sqrt(d)) for t in range(j, i + 1)).item()
    p = min(p, e.size(0) - 1)
    lo, hi = math.floor(p), math.ceil(p)
    ep = (p - lo) * e[hi] + (1 - p + lo) * e[lo]
    return float(q @ k) / math.sqrt(d) + float(q @ ep)


CASES = [("alibi", False, alibi_logit(4)), ("alibi", True, alibi_logit(4)), ("rope", False, rope_logit),
         ("rope", True, rope_logit), ("xpos", True, xpos_logit), ("fire", False, fire_logit(False)),
         ("fire", True, fire_logit(True)), ("cope", True, cope_logit)]
# Randomized positions (Ruoss et al. 2023 §3, positions/randomized.py): in training every self-attention of a stack
# gets one sorted sample of [0, N) in place of 0..T-1, here a sample for T = 6 of [0, 20); the encoding must then be
# its formula at the sampled positions p_i, p_j (distances p_i - p_j; FIRE: normalised at p_i, or in the encoder at
# the last token's p). Every encoding but CoPE takes positions (CoPE counts them from the content).
SAMPLED = torch.tensor([2, 3, 7, 11, 12, 19])
FORMULA_CASES = [(*c, None) for c in CASES] + [(*c, SAMPLED) for c in CASES if c[0] != "cope"]


@pytest.mark.parametrize("name, causal, logit_fn, positions", FORMULA_CASES,
                         ids=[f"{c[0]}-{'dec' if c[1] else 'enc'}-{'plain' if c[3] is None else 'randomized'}"
                              for c in FORMULA_CASES])
def test_encoding_matches_its_formula(name, causal, logit_fn, positions):
    torch.manual_seed(0)
    C, H, T = 16, 4, 6
    sc = build_attention_position(name, DECODER_SELF if causal else ENCODER_SELF, embed_dim=C, num_heads=H,
                                  fire_threshold=3.0, cope_max_positions=4)  # L inside the lengths; p clipped
    with torch.no_grad():
        if name == "fire":
            sc.log_c.fill_(0.3)  # c != the initial 0.1
            sc.threshold_scale.fill_(1.3)  # L = 3.9: inside the lengths, and between the sampled positions
        if name == "cope":
            sc.embedding.normal_()  # the paper starts e at zero
    attn = MultiheadAttention(C, H, scorer=sc).eval()
    inner = logit_fn
    logit_fn = lambda q, k, h, i, j, ctx: inner(q, k, h, i, j, dict(ctx, attn=attn))  # noqa: E731
    x = torch.randn(2, T, C)
    pad = torch.zeros(2, T, dtype=torch.bool)
    if not causal:
        pad[1, :2] = True  # left padding in the encoder (randomized: its real tokens at the sample's last 4)
    with torch.no_grad():
        fast = attn(x, key_padding_mask=pad, causal=causal, positions=positions)
        slow = slow_attention(attn, x, pad, causal, logit_fn, positions)
    keep = ~pad
    assert torch.allclose(fast[keep], slow[keep], atol=1e-5), (fast - slow)[keep].abs().max()
    if positions is not None:  # the sample changes the output: the positions reached the encoding
        assert not torch.allclose(fast, attn(x, key_padding_mask=pad, causal=causal), atol=1e-4)


def test_alibi_slopes_for_8_heads_are_the_papers():
    from fairseq_compgen.modules.positions.alibi import alibi_slopes

    assert alibi_slopes(8).tolist() == pytest.approx([1 / 2 ** k for k in range(1, 9)])
    # §3: "for models that require 16 heads ... 1/2^0.5, 1/2^1, 1/2^1.5, ..., 1/2^8"
    assert alibi_slopes(16).tolist() == pytest.approx([1 / 2 ** (k / 2) for k in range(1, 17)])


@pytest.mark.parametrize("H", [3, 6, 12])
def test_alibi_slopes_for_other_head_counts_follow_the_papers_text(H):
    """§3: "for n heads, our set of slopes is the geometric sequence that starts at 2^(-8/n) and uses that same
    value as its ratio" (the authors' code uses another rule when n is not a power of two; we follow the text)."""
    from fairseq_compgen.modules.positions.alibi import alibi_slopes

    start = 2 ** (-8 / H)
    assert alibi_slopes(H).tolist() == pytest.approx([start * start ** k for k in range(H)])


@pytest.mark.parametrize("name", ["rope", "xpos"])
def test_rotary_logits_depend_on_relative_positions_only(name):
    """RoFormer §3.2: (R_m q) . (R_n k) depends on m - n only (xPos: times zeta^((m-n)/B), also relative); the
    channels are rotated in adjacent pairs (2k, 2k+1) (Eq. 34)."""
    torch.manual_seed(0)
    sc = build_attention_position(name, DECODER_SELF, embed_dim=16, num_heads=1)
    q, k = torch.randn(1, 1, 5, 16, dtype=torch.float64), torch.randn(1, 1, 5, 16, dtype=torch.float64)
    pos = torch.tensor([0, 1, 3, 4, 9])
    logits = [(lambda a, b: a @ b.transpose(-1, -2))(*sc.rotate(q, k, pos + s, pos + s)) for s in (0, 7, 100)]
    assert torch.allclose(logits[0], logits[1], atol=1e-4) and torch.allclose(logits[0], logits[2], atol=1e-4)
    e0 = torch.zeros(1, 1, 1, 16)
    e0[..., 2] = 1.0  # channel 2 rotates into channel 3 (its pair), nowhere else
    rotated = sc.rotate(e0, e0, torch.tensor([5]), torch.tensor([5]))[0].flatten()
    assert set(rotated.nonzero().flatten().tolist()) == {2, 3}


def test_xpos_zeta_is_the_papers():
    """Sun et al. §3: zeta_k = (k / (d/2) + 0.4) / 1.4 for the pairs k = 0..d/2-1, scale base 512."""
    sc = build_attention_position("xpos", DECODER_SELF, embed_dim=16, num_heads=1)
    assert sc.log_zeta.exp().tolist() == pytest.approx([(k / 8 + 0.4) / 1.4 for k in range(8)])
    assert sc.scale_base == 512.0


def test_fire_and_cope_start_as_their_papers_listings():
    fire = build_attention_position("fire", DECODER_SELF, embed_dim=16, num_heads=4)
    assert math.exp(fire.log_c.item()) == pytest.approx(0.1) and fire.threshold().item() == 16.0
    assert (fire.mlp_in.out_features, fire.mlp_out.out_features) == (32, 4)
    cope = build_attention_position("cope", DECODER_SELF, embed_dim=16, num_heads=4)
    assert cope.embedding.shape == (64, 4) and not cope.embedding.any()


@pytest.mark.parametrize("name", ["rope", "alibi", "fire"])
def test_relative_encodings_ignore_left_padding(name):
    """RoPE, ALiBi and FIRE see distances (FIRE: and each example's own length) only: left padding must not change
    the real tokens' outputs."""
    torch.manual_seed(1)
    attn = MultiheadAttention(16, 4, scorer=build_attention_position(name, ENCODER_SELF, embed_dim=16, num_heads=4)).eval()
    x = torch.randn(1, 5, 16)
    padded = torch.cat([torch.randn(1, 3, 16), x], dim=1)
    pad = torch.tensor([[True] * 3 + [False] * 5])
    assert torch.allclose(attn(x), attn(padded, key_padding_mask=pad)[:, 3:], atol=1e-5)


def test_learned_positions_are_added_to_the_embedding():
    model = build("learned_transformer_scan").eval()
    emb = model.encoder.embed
    tokens = torch.tensor([[PAD, 5, 6, 5]])
    expected = math.sqrt(128) * emb.weight[tokens[0, 1:]] + emb.positions.table.weight[:3]
    assert torch.allclose(emb(tokens)[0, 1:], expected, atol=1e-5)
    with pytest.raises(UsageError, match="beyond --learned-max-positions 2"):
        build("learned_transformer_scan", learned_max_positions=2).encoder.embed(tokens)


def test_nope_has_no_position_signal():
    model = build("nope_transformer_scan").eval()
    assert model.encoder.embed.positions is None
    assert all(layer.self_attn.scorer is None for _, layer in model.encoder.stack)
    src = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():  # a bag of tokens: permuting the source permutes the encoder's output
        a = model.encoder(src)["encoder_out"][0]
        b = model.encoder(src[:, [2, 0, 3, 1]])["encoder_out"][0]
    assert torch.allclose(a[:, [2, 0, 3, 1]], b, atol=1e-5)


@pytest.mark.parametrize("arch, embedded", [("nope_transformer_scan", False), ("learned_transformer_scan", True)])
def test_nope_and_learned_presets_have_no_other_position_signal(arch, embedded):
    """No attention of either stack (self or cross) has a position scorer, no randomized positions; only the
    learned preset adds position vectors to the embeddings (of both sides)."""
    model = build(arch)
    attentions = [m for m in model.modules() if isinstance(m, MultiheadAttention)]
    assert attentions and all(a.scorer is None for a in attentions)
    assert model.encoder.random_positions == model.decoder.random_positions == 0
    assert (model.encoder.embed.positions is not None) == (model.decoder.embed.positions is not None) == embedded


# ---- step by step == full forward, for every new preset, with universal sharing, SAG and the copy decoder ------
def _inputs(model, B=3, S=7, T=6):
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, len(model.encoder.dictionary), (B, S), generator=g)
    src[0, :3] = PAD
    prev = torch.randint(4, len(model.decoder.dictionary), (B, T), generator=g)
    prev[:, 0] = 2
    return src, src.ne(PAD).sum(1), prev


COMBOS = [(a, {}) for a in NEW_PRESETS] + [
    ("rope_transformer_scan", dict(universal=True, encoder_sag_init=0.0, decoder_sag_init=0.0)),
    ("alibi_transformer_scan", dict(copy_decoder=True, cross_attn_pos="rel-eb")),
    ("xpos_transformer_scan", dict(universal=True, absolute_positions="learned")),
    ("fire_transformer_scan", dict(universal=True, copy_decoder=True, decoder_sag_init=1.0)),
    # random_positions: the combination builds and decodes; decoding is evaluation, where positions are plain (the
    # sampled positions are checked in training mode: test_encoding_matches_its_formula, test_random_positions_*)
    ("cope_transformer_scan", dict(universal=True, encoder_self_attn_pos="fire", random_positions=64)),
    # FIRE's normaliser psi(max(L, i)) past its threshold: with the default L0 = 16 six steps never leave psi(16)
    ("fire_transformer_scan", dict(fire_threshold=2.0)),
]


def _random_cope_tables(model):
    """CoPE's position vectors start at zero (Golovneva et al. 2024's listing), which makes its term q.e vanish
    in an untrained model: give them values so that a test of the whole model sees CoPE at all."""
    tables = [m.embedding for m in model.modules() if isinstance(m, ContextualPositions)]
    with torch.no_grad():
        for e in tables:
            e.normal_(0.0, 1.0)
    return tables


@pytest.mark.parametrize("arch, flags", COMBOS, ids=[f"{a}-{'+'.join(f) or 'preset'}" for a, f in COMBOS])
def test_step_by_step_decoding_equals_full_forward(arch, flags):
    torch.manual_seed(0)
    model = build(arch, encoder_embed_dim=32, decoder_embed_dim=32, encoder_ffn_embed_dim=64,
                  decoder_ffn_embed_dim=64, encoder_attention_heads=4, decoder_attention_heads=4, **flags).eval()
    assert bool(_random_cope_tables(model)) == arch.startswith("cope")
    src, lengths, prev = _inputs(model)
    with torch.no_grad():
        full, _ = model(src, lengths, prev)
        enc = model.encoder(src, lengths)
        state = {}
        steps = [model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0] for t in range(prev.size(1))]
    diff = (torch.cat(steps, dim=1) - full).abs().max().item()
    assert diff < 1e-4, f"{arch} {flags}: incremental decoding differs from the full forward pass by {diff}"



@pytest.mark.parametrize("arch", ["rope_transformer_scan", "xpos_transformer_scan"])
def test_decoding_rotates_each_key_once(arch, monkeypatch):
    """The decoder's self-attention cache keeps keys as rotated when they were new: step t rotates its own key only,
    never the t earlier ones again (a full pass rotates all its keys in one call)."""
    model = build(arch, encoder_embed_dim=32, decoder_embed_dim=32, encoder_attention_heads=4,
                  decoder_attention_heads=4).eval()
    scorer_cls = type(model.decoder.stack.layers[0].self_attn.scorer)
    keys, rotate = [], scorer_cls.rotate

    def counting(self, q, k, q_pos, k_pos):
        keys.append((k.size(2), tuple(k_pos.tolist())))
        return rotate(self, q, k, q_pos, k_pos)
    monkeypatch.setattr(scorer_cls, "rotate", counting)
    src, lengths, prev = _inputs(model)
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        keys.clear()
        model.decoder(prev, enc)
        assert {n for n, _ in keys} == {prev.size(1)}  # the full pass: every key, in one call per layer
        keys.clear()
        state = {}
        for t in range(prev.size(1)):
            model.decoder(prev[:, : t + 1], enc, incremental_state=state)
    layers = len(keys) // prev.size(1)
    assert layers >= 1 and keys == [(1, (t,)) for t in range(prev.size(1)) for _ in range(layers)]

# ---- randomized positions (Ruoss et al. 2023) -----------------------------------------------------------------
def test_sampled_positions_are_a_sorted_subset():
    from fairseq_compgen.modules.positions.randomized import sample_positions

    g = torch.Generator().manual_seed(0)
    draws = [sample_positions(7, 20, generator=g) for _ in range(50)]
    for p in draws:
        assert p.shape == (7,) and bool((p[1:] > p[:-1]).all()) and 0 <= int(p[0]) and int(p[-1]) < 20
    assert len({tuple(p.tolist()) for p in draws}) > 1 and max(int(p[-1]) for p in draws) > 7  # beyond 0..T-1
    with pytest.raises(UsageError, match="smaller than a sequence of length 21"):
        sample_positions(21, 20)


def sinusoid_slow(p, d):
    """Vaswani et al. Eq. 1 in Csordás et al.'s interleaved layout: P[p, 2k] = sin(p / 10000^(2k/d)),
    P[p, 2k+1] = cos(p / 10000^(2k/d))."""
    return torch.tensor([(math.sin if c % 2 == 0 else math.cos)(p / 10000 ** (2 * (c // 2) / d)) for c in range(d)])


def sinusoid_fairseq_slow(p, d):
    """fairseq's layout: P'[p, k] = sin(p w_k), P'[p, k + d/2] = cos(p w_k), w_k = 10000^(-k / (d/2 - 1)), at
    p + padding_idx + 1."""
    half, p = d // 2, p + PAD + 1
    return torch.tensor([(math.sin if c < half else math.cos)(p * 10000 ** (-(c % half) / (half - 1)))
                         for c in range(d)])


# (--absolute-positions, --embedding-scaling, P(emb, p, d)); both scalings are sqrt(d) E[w] + P
EMBEDDINGS = [("learned", "fairseq", lambda emb, p, d: emb.positions.table.weight[p]),
              ("sinusoidal", "teu", lambda emb, p, d: sinusoid_slow(p, d)),
              ("sinusoidal", "fairseq", lambda emb, p, d: sinusoid_fairseq_slow(p, d))]


@pytest.mark.parametrize("name, scaling, position", EMBEDDINGS, ids=[f"{n}-{s}" for n, s, _ in EMBEDDINGS])
def test_random_positions_reach_the_embedding(name, scaling, position):
    """With randomized positions (Ruoss et al. 2023 §3) the token in column c gets the c-th sampled position, as in
    every self-attention of the stack: its embedding is sqrt(d) E[w] + P(p_c), P the encoding's formula (or learned
    table)."""
    from fairseq_compgen.modules.embedding import TokenEmbedding

    torch.manual_seed(0)
    d = 16
    emb = TokenEmbedding(10, d, PAD, scaling, 0.0, positions=name, position_options={"learned_max_positions": 20})
    tokens = torch.tensor([[PAD, 5, 6, 5]])  # left padding: the real tokens are in columns 1, 2 and 3
    with torch.no_grad():
        got = emb(tokens, positions=SAMPLED)[0, 1:]
        expected = torch.stack([math.sqrt(d) * emb.weight[w] + position(emb, int(SAMPLED[c]), d)
                                for c, w in enumerate(tokens[0].tolist()) if w != PAD])
        assert torch.allclose(got, expected, atol=1e-5)
        assert not torch.allclose(got, emb(tokens)[0, 1:], atol=1e-4)  # not the plain positions 0, 1, 2


def test_random_positions_are_plain_at_evaluation_and_random_in_training():
    """Our stated deviation from Ruoss et al. (whose code samples at evaluation too): training samples, evaluation
    uses 0..T-1 (positions/randomized.py says why)."""
    torch.manual_seed(0)
    model = build("random_rope_transformer_scan", dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    plain = build("rope_transformer_scan", dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    plain.load_state_dict(model.state_dict())
    src, lengths, prev = _inputs(model)
    with torch.no_grad():
        assert torch.equal(model.eval()(src, lengths, prev)[0], plain.eval()(src, lengths, prev)[0])
        trained = model.train()(src, lengths, prev)[0]
    assert not torch.allclose(trained, plain(src, lengths, prev)[0], atol=1e-4)


@pytest.mark.parametrize("flags, error", [
    (dict(arch="nope_transformer_scan"), "needs an encoding that takes positions"),
    (dict(arch="linear_uni_transformer_scan"), "needs softmax self-attention"),
])
def test_random_positions_refused_where_nothing_takes_them(flags, error):
    with pytest.raises(UsageError, match=error):
        build(flags["arch"], random_positions=64)


@pytest.mark.parametrize("arch, option, error", [
    ("rope_transformer_scan", dict(rope_theta=-5.0), "--rope-theta must be a positive number, got -5.0"),
    ("xpos_transformer_scan", dict(xpos_scale_base=0.0), "--xpos-scale-base must be a positive number, got 0.0"),
])
def test_rotary_options_out_of_range(arch, option, error):
    """A negative --rope-theta trained to a NaN loss at the first update, reported as a divergence (2026-11-28)."""
    with pytest.raises(UsageError, match=re.escape(error)):
        build(arch, **option)


@pytest.mark.parametrize("arch", ["alibi_transformer_scan", "rope_transformer_scan", "xpos_transformer_scan",
                                  "fire_transformer_scan", "cope_transformer_scan", "learned_transformer_scan"])
def test_training_attention_path_equals_sdpa(arch):
    """Training computes attention explicitly (modules/attention.py); with a dropout that keeps every weight it
    must equal the SDPA path of evaluation, position terms included."""
    torch.manual_seed(0)
    model = build(arch, dropout=0.0, activation_dropout=0.0, embedding_dropout=0.0, attention_dropout=1e-12,
                  encoder_embed_dim=32, decoder_embed_dim=32, encoder_attention_heads=4, decoder_attention_heads=4)
    assert bool(_random_cope_tables(model)) == arch.startswith("cope")
    src, lengths, prev = _inputs(model)
    with torch.no_grad():
        explicit = model.train()(src, lengths, prev)[0]
        sdpa = model.eval()(src, lengths, prev)[0]
    assert torch.allclose(explicit, sdpa, atol=1e-5)


@pytest.mark.parametrize("threshold", [0.0, -1.0, math.inf, math.nan])
def test_fire_threshold_must_be_finite_and_positive(threshold):
    """--fire-threshold inf passed the old check (threshold <= 0) and trained to NaN gradients at the first update,
    reported as a divergence (helper audit, 2026-11-28)."""
    with pytest.raises(UsageError, match="a finite --fire-threshold > 0"):
        build("fire_transformer_scan", fire_threshold=threshold)
