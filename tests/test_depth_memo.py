"""A shared (Universal, Csordás et al. 2021 §2.2) decoder layer's cross-attention computes its encoder-side
projections once per forward pass (modules/depth_memo.py): the same outputs as computing them at every depth,
bitwise, and the same gradients up to the order in which the depths' contributions are added (float64 here)."""
import pytest
import torch
import torch.nn.functional as F

from fairseq_compgen.modules.depth_memo import DepthMemo, once_per_pass
from model_helpers import build

PAD = 1


def _step(model, memo_on: bool):
    """Forward (train mode, fixed dropout draws) and backward; returns (logits, {name: grad}, k_proj calls)."""
    calls = []
    cross = model.decoder.stack.layers[0].cross_attn
    proj = cross.k_proj
    hook = proj.register_forward_hook(lambda *_: calls.append(1))
    if not memo_on:
        model.decoder.stack.depth_memo = lambda: None  # an instance attribute shadows LayerStack.depth_memo
    try:
        g = torch.Generator().manual_seed(0)
        src = torch.randint(4, len(model.encoder.dictionary), (3, 7), generator=g)
        src[0, :2] = PAD
        tgt = torch.randint(4, len(model.decoder.dictionary), (3, 6), generator=g)
        prev = torch.cat([torch.full_like(tgt[:, :1], 2), tgt[:, :-1]], dim=1)
        model.zero_grad(set_to_none=True)
        torch.manual_seed(1)
        logits, _ = model(src, src.ne(PAD).sum(1), prev)
        F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), tgt.reshape(-1)).backward()
    finally:
        hook.remove()
        model.decoder.stack.__dict__.pop("depth_memo", None)
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, len(calls)


@pytest.mark.parametrize("arch", ["rel_uni_transformer_scan", "uni_transformer_scan", "linear_uni_transformer_scan"])
def test_universal_cross_attention_projects_the_encoder_output_once(arch):
    torch.manual_seed(0)
    model = build(arch).double().train()
    layers = model.decoder.args.decoder_layers
    out, grads, calls = _step(model, memo_on=True)
    ref, ref_grads, ref_calls = _step(model, memo_on=False)
    assert (calls, ref_calls) == (1, layers)
    assert torch.equal(out, ref)
    assert grads.keys() == ref_grads.keys()
    for n in grads:
        assert torch.allclose(grads[n], ref_grads[n], rtol=1e-12, atol=1e-14), n


def test_separate_layers_get_no_memo():
    model = build("rel_transformer_scan")
    assert model.decoder.stack.depth_memo() is None
    assert isinstance(build("rel_uni_transformer_scan").decoder.stack.depth_memo(), DepthMemo)


def test_once_per_pass():
    memo, calls = DepthMemo(), []
    a, b = object(), object()
    compute = lambda: calls.append(1) or len(calls)  # noqa: E731
    assert [once_per_pass(memo, (a, "x"), compute) for _ in range(3)] == [1, 1, 1]
    assert once_per_pass(memo, (b, "x"), compute) == 2  # another key: computed
    assert once_per_pass(None, (a, "x"), compute) == 3  # no memo: always computed
