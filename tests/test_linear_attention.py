"""Linear attention with Q/K normalization and the orthogonality loss (Park & Kim 2024) against direct formulas."""
import pytest
import torch
import torch.nn.functional as F

from fairseq_compgen.criterions.orthogonality import (
    LabelSmoothedCrossEntropyWithOrthogonality,
    orthogonality_loss,
    run_recording_values,
)
from fairseq_compgen.models.standalone import StandInTask
from fairseq_compgen.modules.linear_attention import QK_NORMS, LinearAttention
from model_helpers import build

PAD = 1
NORMS = list(QK_NORMS)


def direct_norm(x, kind, gamma):
    """The paper's Normalization(x) on one vector, written out."""
    eps = 1e-6
    if kind == "none":
        return x
    if kind == "l1":
        return x / (sum(abs(float(t)) for t in x) + eps)
    if kind == "l2":
        return x / (sum(float(t) ** 2 for t in x) ** 0.5 + eps)
    rms = (sum(float(t) ** 2 for t in x) / len(x)) ** 0.5
    return x / (rms + eps) * gamma


def quadratic_reference(attn: LinearAttention, x, kv, pad_mask, causal):
    """out_i = sum_j phi(q_i).phi(k_j) v_j / sum_j phi(q_i).phi(k_j), j over non-pad keys (and j <= i if causal),
    with loops over b, h, i, j."""
    B, Tq, C = x.shape
    Tk = kv.shape[1]
    H, dh = attn.num_heads, attn.head_dim
    q = attn.q_proj(x).view(B, Tq, H, dh).double()
    k = attn.k_proj(kv).view(B, Tk, H, dh).double()
    v = attn.v_proj(kv).view(B, Tk, H, dh).double()
    qg = attn.q_gamma.double() if attn.q_gamma is not None else None
    kg = attn.k_gamma.double() if attn.k_gamma is not None else None
    out = torch.zeros(B, Tq, H, dh, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(Tq):
                qi = direct_norm(F.elu(q[b, i, h]) + 1, attn.qk_norm, qg)
                num, den = torch.zeros(dh, dtype=torch.float64), 0.0
                for j in range(Tk):
                    if (pad_mask is not None and pad_mask[b, j]) or (causal and j > i):
                        continue
                    kj = direct_norm(F.elu(k[b, j, h]) + 1, attn.qk_norm, kg)
                    w = float(qi @ kj)
                    num, den = num + w * v[b, j, h], den + w
                out[b, i, h] = num / den if den != 0 else 0.0
    return attn.out_proj(out.view(B, Tq, C).float())


def _attn(norm, C=16, H=4, seed=0, kv_dim=None):
    torch.manual_seed(seed)
    attn = LinearAttention(C, H, norm, kv_dim=kv_dim).eval()
    if norm == "rms":  # make gamma non-trivial (positive, so denominators stay away from 0)
        with torch.no_grad():
            attn.q_gamma.uniform_(0.5, 1.5)
            attn.k_gamma.uniform_(0.5, 1.5)
    return attn


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_matches_quadratic_formula(norm, causal):
    attn = _attn(norm)
    x = torch.randn(2, 7, 16)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, :3] = True  # left padding in the keys
    with torch.no_grad():
        fast = attn(x, key_padding_mask=pad, causal=causal)
        slow = quadratic_reference(attn, x, x, pad, causal)
    keep = ~pad  # outputs at padded query positions are never used
    assert torch.allclose(fast[keep], slow[keep], atol=1e-5), (fast - slow)[keep].abs().max()


@pytest.mark.parametrize("norm", NORMS)
def test_cross_attention_matches_quadratic_formula(norm):
    attn = _attn(norm, kv_dim=8)
    x, src = torch.randn(2, 4, 16), torch.randn(2, 6, 8)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, :2] = True
    with torch.no_grad():
        fast = attn(x, src, key_padding_mask=pad)
        slow = quadratic_reference(attn, x, src, pad, causal=False)
    assert torch.allclose(fast, slow, atol=1e-5), (fast - slow).abs().max()


def test_padding_contributes_nothing():
    """Left padding (any content) leaves the real positions' outputs unchanged: no positions inside attention."""
    attn = _attn("l2")
    x = torch.randn(1, 5, 16)
    padded = torch.cat([torch.randn(1, 3, 16) * 100, x], dim=1)
    pad = torch.tensor([[True] * 3 + [False] * 5])
    with torch.no_grad():
        assert torch.allclose(attn(x), attn(padded, key_padding_mask=pad)[:, 3:], atol=1e-5)


def test_causal_chunks_agree():
    attn = _attn("rms")
    x = torch.randn(2, 11, 16)
    with torch.no_grad():
        ref = attn(x, causal=True)
        attn.chunk_size = 3  # chunk borders at 3, 6, 9: the carried state (S, z) must join them exactly
        assert torch.allclose(attn(x, causal=True), ref, atol=1e-6)


def test_rms_gamma_is_one_parameter_shared_across_heads():
    attn = LinearAttention(16, 4, "rms")
    l2 = LinearAttention(16, 4, "l2")
    assert attn.q_gamma.shape == attn.k_gamma.shape == (4,)  # d_head, not d_model: one γ for all heads
    extra = sum(p.numel() for p in attn.parameters()) - sum(p.numel() for p in l2.parameters())
    assert extra == 2 * 4  # one γ for Q, one for K
    assert torch.equal(attn.q_gamma.detach(), torch.ones(4))
    x = torch.randn(2, 5, 16)
    attn(x).sum().backward()
    assert attn.q_gamma.grad is not None and attn.k_gamma.grad is not None
    # scaling γ_Q by c scales every head's normalized queries by c: numerator and denominator alike, output unchanged
    with torch.no_grad():
        before = attn(x)
        attn.q_gamma.mul_(3.0)
        assert torch.allclose(attn(x), before, atol=1e-5)


def _inputs(model, B=3, S=7, T=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, len(model.encoder.dictionary), (B, S), generator=g)
    src[0, :3] = PAD  # left padding, as fairseq batches sources
    prev = torch.randint(4, len(model.decoder.dictionary), (B, T), generator=g)
    prev[:, 0] = 2
    return src, src.ne(PAD).sum(1), prev


@pytest.mark.parametrize("arch, overrides", [
    ("linear_l2_uni_transformer_scan", {}),
    ("linear_rms_uni_transformer_scan", {}),
    ("compgen_transformer", dict(self_attn_type="linear", qk_norm="l1")),  # separate layers
])
def test_step_by_step_decoding_with_constant_state(arch, overrides):
    torch.manual_seed(0)
    model = build(arch, **overrides).eval()
    src, lengths, prev = _inputs(model)
    with torch.no_grad():
        full, _ = model(src, lengths, prev)
        enc = model.encoder(src, lengths)
        state, steps, sizes = {}, [], []
        for t in range(prev.size(1)):
            steps.append(model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0])
            sizes.append(sum(x.numel() for buf in state.values() for x in buf.values()))
    assert (torch.cat(steps, 1) - full).abs().max().item() < 1e-4
    assert len(set(sizes)) == 1, f"the decoding state grows with the prefix: {sizes}"
    layers = model.decoder.args.decoder_layers
    assert len(state) == 2 * layers  # (S, z) of self- and cross-attention per depth


def test_beam_reordering_of_the_state():
    torch.manual_seed(0)
    model = build("linear_l2_uni_transformer_scan").eval()
    src, lengths, prev = _inputs(model)
    order = torch.tensor([2, 0, 0])
    with torch.no_grad():
        enc = model.encoder(src, lengths)
        state = {}
        for t in range(3):
            model.decoder(prev[:, : t + 1], enc, incremental_state=state)
        model.decoder.reorder_incremental_state_scripting(state, order)
        enc_r = model.encoder.reorder_encoder_out(enc, order)
        prev_r = prev[order]
        step = model.decoder(prev_r[:, :4], enc_r, incremental_state=state)[0]
        full, _ = model.decoder(prev_r[:, :4], enc_r)
    assert (step[:, -1] - full[:, -1]).abs().max().item() < 1e-4


def direct_orthogonality(values, pad):
    """sum over real n != m of cos(V_n, V_m)^2, mean over b, h: loops."""
    values = values.detach()
    B, H, N, _ = values.shape
    total = 0.0
    for b in range(B):
        for h in range(H):
            real = [n for n in range(N) if not pad[b, n]]
            for n in real:
                for m in real:
                    if n != m:
                        total += float(F.cosine_similarity(values[b, h, n], values[b, h, m], dim=0)) ** 2
    return total / (B * H)


def test_orthogonality_loss_is_sum_of_squared_offdiagonal_cosines():
    torch.manual_seed(0)
    v = torch.randn(3, 2, 6, 5, dtype=torch.float64)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[0, :2] = True
    pad[2, :1] = True
    v[0, :, :2] = 1e3  # pad content must not matter
    assert orthogonality_loss(v, pad).item() == pytest.approx(direct_orthogonality(v, pad), rel=1e-5)
    # orthonormal values -> 0; identical values -> N(N-1)
    assert orthogonality_loss(torch.eye(4)[None, None]).item() == pytest.approx(0.0, abs=1e-9)
    assert orthogonality_loss(torch.ones(1, 1, 4, 3)).item() == pytest.approx(12.0, rel=1e-5)


def _sample(model, seed=0):
    src, lengths, prev = _inputs(model, seed=seed)
    target = torch.cat([prev[:, 1:], torch.full_like(prev[:, :1], 2)], dim=1)
    return {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
            "target": target, "ntokens": target.numel()}


def test_criterion_adds_lambda_times_loss_and_logs_it():
    torch.manual_seed(0)
    model = build("linear_l2_uni_transformer_scan").eval()
    task = StandInTask(model.encoder.dictionary, model.decoder.dictionary)
    sample = _sample(model)
    crit0 = LabelSmoothedCrossEntropyWithOrthogonality(task, False, 0.0, orthogonality_lambda=0.0)
    crit = LabelSmoothedCrossEntropyWithOrthogonality(task, False, 0.0, orthogonality_lambda=0.5)
    loss0, n0, log0 = crit0(model, sample)
    loss, n, log = crit(model, sample)
    # the encoder values, recomputed: the one shared layer applied 3 times; what was recorded is the value
    # projection's output (captured by a hook on v_proj, apart from the recording) in heads [B, H, T, dh]
    att = model.encoder.stack.layers[0].self_attn
    projected = []
    hook = att.v_proj.register_forward_hook(lambda mod, inp, out: projected.append(out.detach()))
    try:
        _, recorded = run_recording_values(model, sample["net_input"])
    finally:
        hook.remove()
    assert len(recorded) == 3 and len(projected) == 3
    src = sample["net_input"]["src_tokens"]
    for (v, mask), out in zip(recorded, projected):
        B, T, C = out.shape
        assert torch.equal(v, out.view(B, T, att.num_heads, C // att.num_heads).transpose(1, 2))
        assert torch.equal(mask, src.eq(model.encoder.dictionary.pad()))
    orth = sum(direct_orthogonality(v.double(), m) for v, m in recorded)
    B = sample["target"].size(0)
    assert log["orthogonality"].item() / B == pytest.approx(orth, rel=1e-4)
    assert n == n0 == sample["ntokens"]
    assert loss.item() == pytest.approx(loss0.item() + 0.5 * orth * n, rel=1e-4)
    assert log["nll_loss"].item() == pytest.approx(log0["nll_loss"].item(), rel=1e-6)
    # the orthogonality term reaches the encoder's value projection; nothing stays recorded afterwards
    model.zero_grad()
    (loss - loss0.detach()).backward()
    assert att.v_proj.weight.grad.abs().sum() > 0 and att.recorded == {} and not att.record_values


def test_qk_norm_needs_linear_attention():
    with pytest.raises(ValueError, match="qk-norm"):
        build("uni_transformer", qk_norm="l2")


def test_presets_follow_the_paper():
    for arch, (d, heads, layers, norm) in {
        "linear_uni_transformer_scan": (128, 8, 3, "none"), "linear_l2_uni_transformer_math": (512, 8, 6, "l2"),
        "linear_l1_uni_transformer_pcfg": (512, 8, 6, "l1"), "linear_rms_uni_transformer_scan": (128, 8, 3, "rms"),
    }.items():
        model = build(arch)
        a = model.encoder.args
        assert (a.encoder_embed_dim, a.encoder_attention_heads, a.encoder_layers, a.qk_norm) == (d, heads, layers, norm)
        assert a.universal and a.self_attn_type == "linear"
        assert isinstance(model.decoder.stack.layers[0].cross_attn, LinearAttention)
        assert isinstance(model.encoder.stack.layers[0].self_attn, LinearAttention)


def test_flags_that_cannot_take_effect_are_refused():
    """A flag the configuration would silently ignore is an error naming the flag."""
    with pytest.raises(ValueError, match=r"--cross-attn-pos rel-eb has no effect with --self-attn-type linear"):
        build("linear_l2_uni_transformer_scan", cross_attn_pos="rel-eb")
    with pytest.raises(ValueError, match=r"--rel-radius must be >= 1, got 0"):
        build("ontanon_rel_eb", rel_radius=0)


def test_feature_map_is_elu_plus_one_in_value_and_gradient():
    from fairseq_compgen.modules.linear_attention import feature_map

    x = torch.cat([torch.linspace(-30, 30, 2001), torch.tensor([0.0, 100.0, 1e4, -1e4])]).requires_grad_(True)
    y = feature_map(x)
    ref = torch.nn.functional.elu(x.detach().clone().requires_grad_(True)) + 1
    assert torch.allclose(y, ref, rtol=1e-6, atol=1e-7) and (y[:2001] > 0).all()  # exp(-30) > 0, elu + 1 rounds to 0
    y.sum().backward()
    xr = x.detach().clone().requires_grad_(True)
    (torch.nn.functional.elu(xr) + 1).sum().backward()
    assert torch.isfinite(x.grad).all() and torch.allclose(x.grad, xr.grad, rtol=1e-6, atol=1e-7)


def direct_formula(attn: LinearAttention, x, kv, pad_mask, causal):
    """Park & Kim's O_n = Q̂_nᵀ Σ_i K̂_i V_iᵀ / (Q̂_nᵀ Σ_i K̂_i + ε) as the quadratic form, with autograd's own ops
    only (elu, explicit norms, a [B, H, Tq, Tk] weight matrix): slow, differentiable, no custom Function."""
    B, Tq, C = x.shape
    Tk = kv.shape[1]
    H, dh, eps = attn.num_heads, attn.head_dim, 1e-6

    def norm(t, gamma):  # t [B, H, T, dh]
        if attn.qk_norm == "l1":
            return t / (t.abs().sum(-1, keepdim=True) + eps)
        if attn.qk_norm == "l2":
            return t / (t.pow(2).sum(-1, keepdim=True).sqrt() + eps)
        if attn.qk_norm == "rms":
            return t / (t.pow(2).mean(-1, keepdim=True).sqrt() + eps) * gamma
        return t

    q = norm(F.elu(attn.q_proj(x).view(B, Tq, H, dh).transpose(1, 2)) + 1, attn.q_gamma)
    k = norm(F.elu(attn.k_proj(kv).view(B, Tk, H, dh).transpose(1, 2)) + 1, attn.k_gamma)
    v = attn.v_proj(kv).view(B, Tk, H, dh).transpose(1, 2)
    w = q @ k.transpose(-1, -2)  # [B, H, Tq, Tk]: Q̂_n·K̂_i
    allowed = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
    if pad_mask is not None:
        allowed = allowed & ~pad_mask.view(B, 1, 1, Tk)
    if causal:
        allowed = allowed & torch.ones(Tq, Tk, dtype=torch.bool).tril()
    w = w * allowed
    out = (w @ v) / (w.sum(-1, keepdim=True) + eps)  # [B, H, Tq, dh]
    return attn.out_proj(out.transpose(1, 2).reshape(B, Tq, C))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("kind", ["self", "causal", "cross"])
def test_gradients_match_direct_formula(norm, kind):
    """The fast path (custom φ and L2 backward, chunked causal form, pads zeroed in K̂ only) against the
    quadratic formula in float64: outputs and the gradients of inputs and every parameter."""
    attn = _attn(norm, kv_dim=8 if kind == "cross" else None).double()
    attn.chunk_size = 4  # two chunks and a carried state for the causal case
    x = torch.randn(2, 7, 16, dtype=torch.float64, requires_grad=True)
    kv = torch.randn(2, 6, 8, dtype=torch.float64, requires_grad=True) if kind == "cross" else x
    pad = torch.zeros(2, kv.shape[1], dtype=torch.bool)
    pad[1, :3] = True  # left padding in the keys
    if kind == "causal":
        pad = None  # the decoder's self-attention takes no padding mask
    keep = (~pad).view(2, -1, 1) if (pad is not None and kind == "self") else torch.ones(2, 7, 1, dtype=torch.bool)
    g = torch.randn(2, 7, 16, dtype=torch.float64) * keep  # padded query positions are never used
    results = []
    for fn in (lambda: attn(x, None if kind != "cross" else kv, key_padding_mask=pad, causal=kind == "causal"),
               lambda: direct_formula(attn, x, kv, pad, kind == "causal")):
        attn.zero_grad(set_to_none=True)
        x.grad = None
        if kind == "cross":
            kv.grad = None
        out = fn()
        (out * g).sum().backward()
        grads = {n: p.grad.clone() for n, p in attn.named_parameters()}
        grads["x"] = x.grad.clone()
        if kind == "cross":
            grads["kv"] = kv.grad.clone()
        results.append((out * keep, grads))
    (fast, fast_g), (slow, slow_g) = results
    assert torch.allclose(fast, slow, atol=1e-10), (fast - slow).abs().max()
    assert fast_g.keys() == slow_g.keys()
    for name in fast_g:
        assert torch.allclose(fast_g[name], slow_g[name], atol=1e-9), (name, (fast_g[name] - slow_g[name]).abs().max())


def test_custom_backward_functions_pass_gradcheck():
    from fairseq_compgen.modules.linear_attention import feature_map, qk_normalize

    torch.manual_seed(0)
    x = torch.randn(3, 5, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(feature_map, (x,))
    y = (torch.rand(3, 5, 8, dtype=torch.float64) + 0.1).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: qk_normalize(t, "l2"), (y,))
    # a zero vector (φ underflowed everywhere): the gradient is g / ε, as autograd's masked norm gradient gives
    z = torch.zeros(2, 8, requires_grad=True)
    qk_normalize(z, "l2").sum().backward()
    assert torch.equal(z.grad, torch.full((2, 8), 1e6))
