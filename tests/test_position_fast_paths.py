"""The fast computations of Ontañón et al.'s relative labels (modules/positions/relative_ontanon.py) and of CoPE
(modules/positions/cope.py), and the attention core's written-out path that a trainable bias takes on CPU
(modules/attention.py, `_biased_attention`), against direct float64 implementations of the papers' formulas
written here: per-pair embeddings r_c(i,j) materialised, CoPE positions as explicit sums of gates, no label tables,
no gathers, no hand-written gradients. Outputs AND the gradients of every parameter, in training mode (the path
the fast code takes when gradients are needed), for encoder self-attention (left padding), decoder self-attention
run step by step, and decoder-to-encoder attention (rel2: labels from the first real source token; rel0: l_0).
"""
import copy
import math

import pytest
import torch

from fairseq_compgen.modules.attention import MultiheadAttention
from fairseq_compgen.modules.positions import CROSS, DECODER_SELF, ENCODER_SELF, build_attention_position

C, H = 16, 2  # d_head 8


def build(name, site, cross=False, seed=0, **options):
    torch.manual_seed(seed)
    scorer = build_attention_position(name, site, embed_dim=C, num_heads=H, **options)
    attn = MultiheadAttention(C, H, bias=True, scorer=scorer, key_positions_from_padding=cross).train()
    with torch.no_grad():  # away from their initial values (CoPE starts at zero, biases at zero)
        for p in attn.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return attn


# ---- the formulas, directly --------------------------------------------------------------------------------------
def ontanon_logits(sc, q, k, q_pos, k_pos):
    """Ontañón et al. 2022 §4.1: e_ij = (q_i.k_j + q_i.r_c + b_c) / sqrt(d_h), c = clip(j - i, -R, R) + R (the
    constant l_0, c = R, in rel0-*). q [B, H, Tq, dh], k [B, H, Tk, dh], q_pos [Tq], k_pos [B, Tk]."""
    R = sc.radius
    c = (k_pos[:, None, :] - q_pos[None, :, None]).clamp(-R, R) + R  # [B, Tq, Tk]
    if sc.constant_label:
        c = torch.full_like(c, R)
    logits = q @ k.transpose(-1, -2)
    if sc.rel_embedding is not None:
        r = sc.rel_embedding[c]  # [B, Tq, Tk, dh]: the embedding of every pair
        logits = logits + torch.einsum("bhid,bijd->bhij", q, r)
    if sc.rel_bias is not None:
        logits = logits + sc.rel_bias[c][:, None]
    return logits / math.sqrt(q.size(-1))


def cope_logits(sc, q, k, q_pos, k_pos):
    """Golovneva et al. 2024 §3 (scaling as in their listing): g_it = sigmoid(q_i.k_t / sqrt(d_h)), p_ij = sum over
    t = j..i of g_it, clipped at P - 1, e[p] = (p - floor p) e[ceil p] + (1 - p + floor p) e[floor p],
    logit_ij = q_i.k_j / sqrt(d_h) + q_i.e[p_ij]."""
    e = sc.embedding  # [P, dh]
    a = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))  # [B, H, Tq, Tk]
    seen = (k_pos[None, :] <= q_pos[:, None]).to(q.dtype)  # [Tq, Tk]: t <= i
    g = torch.sigmoid(a) * seen
    from_j = (k_pos[:, None] >= k_pos[None, :]).to(q.dtype)  # [Tk(t), Tk(j)]: t >= j
    p = (g @ from_j).clamp(max=e.size(0) - 1)  # [B, H, Tq, Tk]: sum_{t=j}^{i} g_it
    lo, hi = p.floor(), p.ceil()
    ep = (p - lo)[..., None] * e[hi.long()] + (1 - p + lo)[..., None] * e[lo.long()]  # [B, H, Tq, Tk, dh]
    return a + torch.einsum("bhid,bhijd->bhij", q, ep)


def direct_attention(attn, logits_fn, x, kv=None, pad=None, causal=False):
    """softmax_j(logits, blocked keys excluded) v, then W_o: [B, Tq, C]; positions as MultiheadAttention gives them."""
    kv = x if kv is None else kv
    B, Tq, _ = x.shape
    Tk = kv.size(1)
    heads = lambda t: t.view(B, t.size(1), H, C // H).transpose(1, 2)  # noqa: E731
    q, k, v = heads(attn.q_proj(x)), heads(attn.k_proj(kv)), heads(attn.v_proj(kv))
    q_pos = torch.arange(Tq)
    k_pos = torch.arange(Tk).expand(B, Tk)
    if attn.key_positions_from_padding and pad is not None:
        k_pos = (~pad).long().cumsum(1) - 1  # counted from the first real token
    if isinstance(attn.scorer, type(build_attention_position("cope", DECODER_SELF, embed_dim=C, num_heads=H))):
        logits = logits_fn(attn.scorer, q, k, q_pos, torch.arange(Tk))
    else:
        logits = logits_fn(attn.scorer, q, k, q_pos, k_pos)
    blocked = torch.zeros(B, 1, Tq, Tk, dtype=torch.bool)
    if causal:
        blocked = blocked | (torch.arange(Tk)[None, :] > torch.arange(Tq)[:, None])
    if pad is not None:
        blocked = blocked | pad[:, None, None, :]
    probs = torch.softmax(logits.masked_fill(blocked, float("-inf")), -1)
    return attn.out_proj((probs @ v).transpose(1, 2).reshape(B, Tq, C))


def compare(attn, logits_fn, x, kv=None, pad=None, causal=False, steps=False, keep=None):
    """The module in float64 (its fast path) against the formula in float64: outputs, and gradients of every
    parameter for a random linear loss. `steps`: the module decodes one query at a time (incremental state)."""
    fast, slow = copy.deepcopy(attn).double(), copy.deepcopy(attn).double()
    x = x.double()
    kv = None if kv is None else kv.double()
    if steps:
        state = {}
        out = torch.cat([fast(x[:, t:t + 1], kv, key_padding_mask=pad, causal=causal, incremental_state=state)
                         for t in range(x.size(1))], 1)
    else:
        out = fast(x, kv, key_padding_mask=pad, causal=causal)
    ref = direct_attention(slow, logits_fn, x, kv, pad, causal)
    keep = torch.ones(out.shape[:2], dtype=torch.bool) if keep is None else keep
    w = torch.randn(out.shape, dtype=torch.float64) * keep[..., None]
    (out * w).sum().backward()
    (ref * w).sum().backward()
    assert torch.allclose(out[keep], ref[keep], rtol=1e-9, atol=1e-11), (out - ref)[keep].abs().max()
    grads = dict(slow.named_parameters())
    for name, p in fast.named_parameters():
        g, g_ref = p.grad, grads[name].grad
        assert g is not None and g_ref is not None, name
        assert torch.allclose(g, g_ref, rtol=1e-8, atol=1e-11), (name, (g - g_ref).abs().max())
    return out


KINDS = ["rel-e", "rel-b", "rel-eb"]


@pytest.mark.parametrize("kind", KINDS)
def test_ontanon_encoder_self_attention(kind):
    attn = build(kind, ENCODER_SELF, radius=3)  # a small radius: clipped and unclipped labels
    x = torch.randn(3, 9, C)
    pad = torch.zeros(3, 9, dtype=torch.bool)
    pad[1, :4] = True  # left padding
    compare(attn, ontanon_logits, x, pad=pad, keep=~pad)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("steps", [False, True], ids=["full", "step_by_step"])
def test_ontanon_decoder_self_attention(kind, steps):
    attn = build(kind, DECODER_SELF, radius=3)
    compare(attn, ontanon_logits, torch.randn(2, 8, C), causal=True, steps=steps)


@pytest.mark.parametrize("kind", KINDS + ["rel0-e", "rel0-b", "rel0-eb"])
@pytest.mark.parametrize("steps", [False, True], ids=["full", "step_by_step"])
def test_ontanon_cross_attention(kind, steps):
    """rel-*: the rel2 models' cross-attention (source positions from the first real token); rel0-*: l_0 everywhere."""
    attn = build(kind, CROSS, cross=True, radius=3)
    src = torch.randn(3, 7, C)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[0, :2] = True
    pad[2, :5] = True
    compare(attn, ontanon_logits, torch.randn(3, 9, C), src, pad=pad, steps=steps)


@pytest.mark.parametrize("P", [64, 4], ids=["unclipped", "clipped"])
@pytest.mark.parametrize("steps", [False, True], ids=["full", "step_by_step"])
def test_cope_decoder_self_attention(P, steps):
    """P = 64 > every key count (positions never clipped; only q.e[n] for n <= Tk computed); P = 4 < 9 keys."""
    attn = build("cope", DECODER_SELF, max_positions=P)
    compare(attn, cope_logits, torch.randn(2, 9, C) * 2, causal=True, steps=steps)


def test_float32_fast_paths_are_the_formulas():
    """The same in float32, against the float64 formulas: rounding only."""
    torch.manual_seed(1)
    for attn, logits_fn, args in [
        (build("rel-eb", DECODER_SELF), ontanon_logits, dict(causal=True)),
        (build("cope", DECODER_SELF), cope_logits, dict(causal=True)),
    ]:
        x = torch.randn(4, 20, C)
        out = attn(x, **args)
        ref = direct_attention(copy.deepcopy(attn).double(), logits_fn, x.double(), **args)
        assert torch.allclose(out.double(), ref, atol=1e-5), (out.double() - ref).abs().max()


def test_trainable_bias_with_a_query_that_sees_no_key():
    """An all-padding source: its queries get zero attention (as SDPA's math path gives them), no NaN anywhere, and
    the other examples are unaffected (the written-out path keeps SDPA's "safe softmax" rows)."""
    attn = build("rel-eb", CROSS, cross=True)
    x, src = torch.randn(2, 5, C), torch.randn(2, 6, C)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1] = True
    out = attn(x, src, key_padding_mask=pad)
    out.sum().backward()
    assert torch.allclose(out[1], attn.out_proj.bias.expand(5, C))
    assert all(torch.isfinite(p.grad).all() for p in attn.parameters())
    with torch.no_grad():
        alone = attn(x[:1], src[:1])
    assert torch.allclose(out[:1], alone, atol=1e-6)


def test_trainable_bias_path_is_sdpas_bitwise():
    """With a bias that needs a gradient, CPU SDPA takes its math path; the written-out path is the same
    operations in the same order: bitwise equal outputs and gradients (a causal mask and a padding mask)."""
    import torch.nn.functional as F

    from fairseq_compgen.modules.attention import _biased_attention

    torch.manual_seed(0)
    B, Hh, Tq, Tk, d = 3, 2, 7, 7, 8
    for blocked in [(torch.arange(Tk)[None, :] > torch.arange(Tq)[:, None]).view(1, 1, Tq, Tk),
                    (torch.rand(B, Tk) < 0.3).view(B, 1, 1, Tk) & (torch.arange(Tk) > 0)]:
        q, k, v = (torch.randn(B, Hh, T, d, requires_grad=True) for T in (Tq, Tk, Tk))
        bias = torch.randn(B, Hh, Tq, Tk, requires_grad=True)
        ours = _biased_attention(q, k, v, bias, blocked, d**-0.5)
        sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.masked_fill(blocked, float("-inf")),
                                              scale=d**-0.5)
        assert torch.equal(ours, sdpa)
        g = torch.randn_like(ours)
        for a, b in zip(torch.autograd.grad(ours, (q, k, v, bias), g), torch.autograd.grad(sdpa, (q, k, v, bias), g)):
            assert torch.equal(a, b)
