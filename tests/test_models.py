"""The architectures of Csordás et al. (2021) against their formulas, their decoding, and Table 5's sizes."""
import math

import pytest
import torch

from fairseq_compgen.modules.attention import MultiheadAttention
from fairseq_compgen.modules.positions import TokenEmbedding, sinusoid
from fairseq_compgen.modules.relative_txl import TransformerXLScorer
from model_helpers import build, compgen_archs

PAD = 1


def slow_relative_attention(attn: MultiheadAttention, x, pad_mask, causal):
    """Csordás et al. App. C / Dai et al. (2019), written term by term with loops over b, h, i, j:
    A_ij = q_i.k_j + q_i.(W_kP P_{j-i}) + u.k_j + v.(W_kP P_{j-i}), scaled by 1/sqrt(d_head)."""
    B, T, C = x.shape
    H, dh = attn.num_heads, attn.head_dim
    sc = attn.scorer
    q = attn.q_proj(x).view(B, T, H, dh)
    k = attn.k_proj(x).view(B, T, H, dh)
    v = attn.v_proj(x).view(B, T, H, dh)
    out = torch.zeros(B, T, H, dh, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(T):
                logits = []
                for j in range(T):
                    p = sinusoid(torch.tensor(float(j - i)), C)  # P_{j-i}, [C]
                    r = (sc.pos_proj.weight @ p).view(H, dh)[h]  # W_{k,P} P_{j-i}, head h
                    a = q[b, i, h] @ k[b, j, h]  # (a) content
                    a = a + q[b, i, h] @ r  # (b) content-dependent position
                    a = a + sc.u[h] @ k[b, j, h]  # (c) global content bias
                    a = a + sc.v[h] @ r  # (d) global position bias
                    blocked = bool(pad_mask[b, j]) or (causal and j > i)
                    logits.append(float("-inf") if blocked else float(a) / math.sqrt(dh))
                w = torch.softmax(torch.tensor(logits, dtype=torch.float64), 0)
                out[b, i, h] = sum(w[j] * v[b, j, h].double() for j in range(T))
    return attn.out_proj(out.view(B, T, C).float())


@pytest.mark.parametrize("causal", [False, True])
def test_relative_attention_matches_formula(causal):
    torch.manual_seed(0)
    C, H = 16, 4
    attn = MultiheadAttention(C, H, dropout=0.0, scorer=TransformerXLScorer(C, H, causal)).eval()
    with torch.no_grad():  # u, v start at 0: make them non-zero so terms (c) and (d) are tested
        attn.scorer.u.normal_()
        attn.scorer.v.normal_()
    x = torch.randn(2, 6, C)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    if not causal:
        pad[1, :2] = True  # left padding in the encoder
    with torch.no_grad():
        fast = attn(x, key_padding_mask=pad, causal=causal)
        slow = slow_relative_attention(attn, x, pad, causal)
    keep = ~pad  # outputs at padded query positions are never used
    assert torch.allclose(fast[keep], slow[keep], atol=1e-5), (fast - slow)[keep].abs().max()


def test_relative_attention_is_shift_invariant_and_ignores_left_padding():
    """Relative attention sees distances only: left padding must not change the real tokens' outputs."""
    torch.manual_seed(1)
    attn = MultiheadAttention(16, 4, scorer=TransformerXLScorer(16, 4, False)).eval()
    x = torch.randn(1, 5, 16)
    padded = torch.cat([torch.randn(1, 3, 16), x], dim=1)
    pad = torch.tensor([[True] * 3 + [False] * 5])
    a = attn(x)
    b = attn(padded, key_padding_mask=pad)[:, 3:]
    assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("start, positions", [(0, None), (4, None), (0, torch.tensor([0, 2, 3, 7, 8, 12]))])
def test_causal_relative_table_equals_the_full_table(start, positions):
    """The decoder's scorer scores distances j - i <= 0 only (relative_txl.py): on every attended entry (j <= i) its
    bias equals that of the full table of all distances, and so do the gradients, in float64 (float32 may differ in
    the last bits: the product's kernel depends on the table's size). Also for a decoding step (start > 0) and for
    randomized (gapped) positions."""
    torch.manual_seed(0)
    B, H, dh, T = 2, 4, 8, 6
    causal = TransformerXLScorer(H * dh, H, causal=True).double()
    full = TransformerXLScorer(H * dh, H, causal=False).double()
    full.load_state_dict(causal.state_dict())
    with torch.no_grad():
        causal.v.normal_()
        full.v.copy_(causal.v)
    k_pos = torch.arange(start + T) if positions is None else positions
    q_pos = k_pos[start:]  # the last T positions (a decoding step sees every earlier key)
    q = torch.randn(B, H, len(q_pos), dh, dtype=torch.float64, requires_grad=True)
    attended = k_pos[None, :] <= q_pos[:, None]  # [Tq, Tk]
    g = torch.randn(B, H, len(q_pos), len(k_pos), dtype=torch.float64) * attended
    grads = []
    for sc in (causal, full):
        bias = sc.bias(q, q_pos, k_pos, dh**-0.5)  # [B, H, Tq, Tk]
        grads.append((bias.masked_fill(~attended, 0.0),
                       torch.autograd.grad((bias * g).sum(), (q, sc.v, sc.pos_proj.weight))))
    (a, ga), (b, gb) = grads
    assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)
    for x, y in zip(ga, gb):
        assert torch.allclose(x, y, rtol=1e-12, atol=1e-12)


def test_sinusoid_is_eq1():
    d = 8
    p = sinusoid(torch.tensor([0.0, 3.0, -2.0]), d)
    for row, pos in enumerate([0.0, 3.0, -2.0]):
        for k in range(d // 2):
            assert p[row, 2 * k].item() == pytest.approx(math.sin(pos / 10000 ** (2 * k / d)), abs=1e-6)
            assert p[row, 2 * k + 1].item() == pytest.approx(math.cos(pos / 10000 ** (2 * k / d)), abs=1e-6)


@pytest.mark.parametrize("scaling", ["teu", "none", "ped"])
def test_embedding_scaling(scaling):
    torch.manual_seed(0)
    d = 64
    emb = TokenEmbedding(50, d, PAD, scaling, dropout=0.0)
    tokens = torch.tensor([[PAD, 5, 6, 7]])  # left-padded: positions 0, 1, 2 for the real tokens
    out = emb(tokens)
    P = sinusoid(torch.arange(3.0), d)
    E = emb.weight[tokens[0, 1:]]
    expected = {"teu": math.sqrt(d) * E + P, "none": E + P, "ped": E + P / math.sqrt(d)}[scaling]
    assert torch.allclose(out[0, 1:], expected, atol=1e-5)
    std = emb.weight[4:].std().item()
    expected_std = {"teu": math.sqrt(2.0 / (d + 50)), "none": 1.0, "ped": math.sqrt(2.0 / d)}[scaling]
    assert std == pytest.approx(expected_std, rel=0.1)


@pytest.mark.parametrize("positions", [True, False])
def test_keras_embedding_of_the_tf_tutorial(positions):
    """Ontañón et al. (2022) App. A: E ~ U[-0.05, 0.05] (Keras' default), H = sqrt(d) E[w] (+ P for `abs` only)."""
    torch.manual_seed(0)
    d = 64
    emb = TokenEmbedding(50, d, PAD, "keras", dropout=0.0, positions=positions)
    tokens = torch.tensor([[PAD, 5, 6, 7]])
    expected = math.sqrt(d) * emb.weight[tokens[0, 1:]] + (sinusoid(torch.arange(3.0), d) if positions else 0)
    assert torch.allclose(emb(tokens)[0, 1:], expected, atol=1e-5)
    w = emb.weight[4:]
    assert w.abs().max().item() <= 0.05 and w.std().item() == pytest.approx(0.1 / math.sqrt(12), rel=0.1)


def _inputs(model, B=3, S=7, T=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, len(model.encoder.dictionary), (B, S), generator=g)
    src[0, :3] = PAD  # left padding, as fairseq batches sources
    prev = torch.randint(4, len(model.decoder.dictionary), (B, T), generator=g)
    prev[:, 0] = 2  # decoding starts from EOS
    return src, src.ne(PAD).sum(1), prev


@pytest.mark.parametrize("arch", compgen_archs())
def test_step_by_step_decoding_equals_full_forward(arch):
    torch.manual_seed(0)
    model = build(arch).eval()
    src, lengths, prev = _inputs(model)
    with torch.no_grad():
        full, _ = model(src, lengths, prev)  # [B, T, V]
        enc = model.encoder(src, lengths)
        state = {}
        steps = [model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0] for t in range(prev.size(1))]
    diff = (torch.cat(steps, dim=1) - full).abs().max().item()
    assert diff < 1e-4, f"{arch}: incremental decoding differs from the full forward pass by {diff}"


@pytest.mark.parametrize("arch", ["rel_uni_transformer", "syntactic_attention"])
@pytest.mark.parametrize("order", [[0, 1, 2], [0, 1], [2, 0, 0]], ids=["identity", "shorter-identity", "beam-step"])
def test_reordering_skips_only_what_would_change_nothing(order, arch):
    """fairseq's generator reorders the encoder output and every cache at each step. Greedy decoding's order is the
    identity wherever no sentence finished: then nothing is copied (models/common.py:unchanged_order). A shorter
    identity (the last sentence finished and left the batch) and a beam step still reorder, and step-by-step
    decoding then equals the full pass over the reordered batch."""
    torch.manual_seed(0)
    model = build(arch).eval()
    src, lengths, prev = _inputs(model)
    order = torch.tensor(order)
    identity = order.tolist() == list(range(src.size(0)))
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        full = model.decoder(prev[order], model.encoder.reorder_encoder_out(enc, order))[0]  # [len(order), T, V]
        state = {}
        steps = [model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0][order] for t in range(3)]
        cached = {key: dict(buf) for key, buf in state.items()}
        model.decoder.reorder_incremental_state_scripting(state, order)
        before, enc = enc, model.encoder.reorder_encoder_out(enc, order)
        assert (enc is before) == identity
        kept = [state[key][name] is t for key, buf in cached.items() for name, t in buf.items() if t is not None]
        assert kept and all(k == identity for k in kept)
        prev = prev[order]
        steps += [model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0] for t in range(3, prev.size(1))]
    assert (torch.cat(steps, dim=1) - full).abs().max() < 1e-4


@pytest.mark.parametrize("arch", compgen_archs())
def test_beam_search_with_caches_equals_beam_search_without(arch):
    """A whole fairseq beam search (beam 4: hypotheses reordered and duplicated, finished ones leaving, sentences
    leaving the batch) gives the same hypotheses and scores with the decoding caches as with the full decoder pass
    over each prefix at every step (SequenceGenerator's path for a model without incremental state)."""
    from fairseq.sequence_generator import SequenceGenerator

    torch.manual_seed(0)
    model = build(arch).eval()
    src, lengths, _ = _inputs(model, B=4)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    eos, normalized = model.decoder.dictionary.eos(), model.get_normalized_probs

    def favour_eos(net_output, log_probs, sample=None):  # an untrained model rarely ends: hypotheses must finish
        lp = normalized(net_output, log_probs=True, sample=sample)
        lp[..., eos] += 2.0
        return lp.log_softmax(-1)

    model.get_normalized_probs = favour_eos
    found = []
    for cached in (True, False):
        gen = SequenceGenerator([model], model.decoder.dictionary, beam_size=4, max_len_a=0, max_len_b=10, min_len=0)
        gen.model.has_incremental = cached
        with torch.no_grad():
            found.append(gen.generate([model], sample))
    with_cache, without = found
    assert [[h["tokens"].tolist() for h in hyps] for hyps in with_cache] == \
        [[h["tokens"].tolist() for h in hyps] for hyps in without]
    scores = [torch.stack([h["score"] for h in hyps]) for hyps in with_cache]
    assert all(torch.allclose(a, torch.stack([h["score"] for h in b]), atol=1e-4) for a, b in zip(scores, without))
    assert sum(len(h) for h in with_cache) == 16 and len({len(h["tokens"]) for hyps in with_cache for h in hyps}) > 1


def test_universal_depths_keep_separate_caches():
    """With one shared decoder layer, each depth must have its own cache entry (fairseq-host trap 5)."""
    model = build("rel_uni_transformer").eval()
    src, lengths, prev = _inputs(model)
    state = {}
    with torch.no_grad():
        model.decoder(prev[:, :1], model.encoder(src, lengths), incremental_state=state)
    self_attn_keys = [k for k in state if k.startswith(model.decoder.stack.layers[0].self_attn._incremental_state_id)]
    assert len(self_attn_keys) == 3


def csordas_param_count(d, f, layers, v_in_rows, v_out_rows, relative, universal):
    """Csordás et al. (2021), Table 5, with their code's layers: encoder layer 4d²+2df+f+5d, decoder layer 8d²+2df+f+7d, +d²+2d per relative self-attention,
    embeddings (V_in+2)d + (V_out+1)d + output bias (V_out+1)."""
    enc = 4 * d * d + 2 * d * f + f + d + 4 * d + (d * d + 2 * d if relative else 0)
    dec = 8 * d * d + 2 * d * f + f + d + 6 * d + (d * d + 2 * d if relative else 0)
    n = 1 if universal else layers
    return n * (enc + dec) + v_in_rows * d + v_out_rows * d + v_out_rows


# Table 5 (SCAN row block) and the formula with the authors' vocabularies: 13+2 input rows, 6+1 output rows.
# A fairseq dictionary has 4 special symbols, so 11 + 4 = 15 and 3 + 4 = 7 rows reproduce the authors' sizes.
@pytest.mark.parametrize(
    "arch, table5",
    [("compgen_transformer_scan", 992_000), ("uni_transformer_scan", 333_000),
     ("rel_transformer_scan", 1_100_000), ("rel_uni_transformer_scan", 366_000)],
)
def test_parameter_counts_match_table5(arch, table5):
    model = build(arch, src_words=11, tgt_words=3)
    n = sum(p.numel() for p in model.parameters())
    relative, universal = arch.startswith("rel"), "uni" in arch
    assert n == csordas_param_count(128, 256, 3, 15, 7, relative, universal)
    assert abs(n - table5) / table5 < 0.01, f"{arch}: {n} parameters vs Table 5's {table5}"


def test_universal_has_one_layer_of_parameters():
    uni, sep = build("rel_uni_transformer_scan"), build("rel_transformer_scan")
    assert len(uni.encoder.stack.layers) == 1 and len(uni.decoder.stack.layers) == 1
    assert len(sep.encoder.stack.layers) == 3
    layer = sum(p.numel() for p in sep.encoder.stack.layers[0].parameters())
    assert sum(p.numel() for p in uni.encoder.stack.parameters()) == layer


@pytest.mark.parametrize(
    "arch, size",
    [("compgen_transformer_cfq", (128, 256, 16, 2)), ("rel_uni_transformer_cfq", (256, 512, 4, 6)),
     ("uni_transformer_pcfg", (512, 2048, 8, 6)), ("rel_transformer_cogs", (512, 512, 8, 2)),
     ("rel_uni_transformer_math", (512, 2048, 8, 6))],
)
def test_presets_follow_table4(arch, size):
    model = build(arch)
    a = model.encoder.args
    assert (a.encoder_embed_dim, a.encoder_ffn_embed_dim, a.encoder_attention_heads, a.encoder_layers) == size
    assert (a.decoder_embed_dim, a.decoder_ffn_embed_dim, a.decoder_attention_heads, a.decoder_layers) == size


def test_command_line_overrides_preset():
    model = build("rel_uni_transformer_pcfg", encoder_layers=2, embedding_scaling="teu")
    assert model.encoder.args.encoder_layers == 2 and model.encoder.args.decoder_layers == 6


def test_relative_models_have_no_absolute_positions():
    model = build("rel_transformer")
    assert model.encoder.embed.scaling is None
    x = torch.tensor([[5, 5, 5]])
    e = model.encoder.embed.eval()(x)
    assert torch.allclose(e[0, 0], e[0, 2])  # same token, same embedding wherever it stands


def test_share_all_embeddings_needs_joined_dictionary():
    with pytest.raises(ValueError, match="joined dictionary"):
        build("compgen_transformer", share_all_embeddings=True)


@pytest.mark.parametrize("arch", ["compgen_transformer", "rel_uni_transformer", "ontanon_rel2_eb_c", "sag_t5_transformer"])
def test_training_attention_path_equals_sdpa(arch):
    """Training with attention dropout computes attention explicitly (modules/attention.py); with a dropout that
    keeps every weight it must equal the SDPA path used at evaluation, masks and position biases included."""
    torch.manual_seed(0)
    model = build(arch, dropout=0.0, activation_dropout=0.0, embedding_dropout=0.0, attention_dropout=1e-12)
    src, lengths, prev = _inputs(model)
    with torch.no_grad():
        explicit = model.train()(src, lengths, prev)[0]
        sdpa = model.eval()(src, lengths, prev)[0]
    assert torch.allclose(explicit, sdpa, atol=1e-5)


def test_docs_building_block_example_runs():
    """docs/models.md's plain-PyTorch example (typed building blocks, no argparse `args`) runs as printed."""
    from docs_helpers import REPO

    text = (REPO / "docs" / "models.md").read_text(encoding="utf-8")
    block = text.split("usable without fairseq's command line", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope = {}
    exec(compile(block, "docs/models.md", "exec"), scope)
    assert scope["y"].shape == (2, 10, 64) and scope["z"].shape == (2, 10, 64)
