"""Reduced precision: every architecture under bf16 autocast (our `--autocast-bf16`) and with weights cast
to bf16 / fp16 (what fairseq's CUDA `--bf16` / `--fp16` do), run on CPU: no NaN/Inf, close to fp32, step-by-step
decoding equal to the full forward pass; a training step under autocast; and the flag through the compgen task."""
import contextlib
import copy

import pytest
import torch
from fairseq.models import ARCH_CONFIG_REGISTRY

from model_helpers import build, build_task, compgen_archs, first_batch
from test_models import _inputs

SUFFIXES = ("_scan", "_cfq", "_pcfg", "_cogs", "_math", "_iwslt_de_en", "_flores", "_noun_adj")
# one preset per mechanism: the presets without a dataset suffix (a suffix only changes sizes and dropout), plus
# the linear-attention family and the position encodings of models/archs_positions.py, whose presets all carry one
ARCHS = sorted({a for a in compgen_archs() if not a.endswith(SUFFIXES)} |
               {a for a in compgen_archs() if a.startswith("linear_") and a.endswith("_scan")} |
               {a for a in compgen_archs() if ARCH_CONFIG_REGISTRY[a].__module__.endswith("archs_positions")})
# max |log p - log p_fp32| over every position and word: bf16 keeps 8 bits of mantissa, fp16 11. Measured on
# these presets (random init, batch of 3 with left padding): at most 0.06 (bf16, autocast) and 0.009 (fp16); a
# mask or a cache that breaks under a dtype gives differences of order 1
TOL = {"autocast": 0.2, "bf16": 0.2, "fp16": 0.03}


def _log_probs(logits):
    return logits.float().log_softmax(-1)


def _run(model, src, lengths, prev, mode):
    """Full forward pass and step-by-step decoding, log-probabilities [B, T, V] of each."""
    if mode == "autocast":
        ctx = torch.autocast("cpu", dtype=torch.bfloat16)
    else:
        model = copy.deepcopy(model).to(torch.bfloat16 if mode == "bf16" else torch.float16)
        ctx = contextlib.nullcontext()
    with torch.no_grad(), ctx:
        full, _ = model(src, lengths, prev)
        enc = model.encoder(src, lengths)
        state = {}
        steps = [model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0] for t in range(prev.size(1))]
    return _log_probs(full), _log_probs(torch.cat(steps, dim=1))


@pytest.mark.parametrize("mode", ["autocast", "bf16", "fp16"])
@pytest.mark.parametrize("arch", ARCHS)
def test_forward_and_decoding_in_reduced_precision(arch, mode):
    torch.manual_seed(0)
    model = build(arch).eval()
    src, lengths, prev = _inputs(model)
    with torch.no_grad():
        ref = _log_probs(model(src, lengths, prev)[0])
    full, steps = _run(model, src, lengths, prev, mode)
    assert torch.isfinite(full).all() and torch.isfinite(steps).all(), f"{arch} {mode}: NaN/Inf"
    d_ref, d_inc = (full - ref).abs().max().item(), (steps - full).abs().max().item()
    assert d_ref < TOL[mode], f"{arch} {mode}: log-probabilities differ from fp32 by {d_ref}"
    assert d_inc < TOL[mode], f"{arch} {mode}: step-by-step decoding differs from the full pass by {d_inc}"


# a training step on each family of mechanisms (content attention, relative scorers, universal sharing, SAG,
# span/conv scorers, copy decoder, linear attention, Syntactic Attention, ALiBi, RoPE, FIRE, CoPE)
TRAIN_ARCHS = ["compgen_transformer", "rel_uni_transformer", "sag_t5_transformer", "sag_conv_transformer",
               "sag_fixed_span_transformer", "ontanon_rel2_eb_c", "linear_l2_uni_transformer_scan",
               "syntactic_attention", "alibi_transformer_scan", "rope_transformer_scan", "fire_transformer_scan",
               "cope_transformer_scan"]


@pytest.mark.parametrize("arch", TRAIN_ARCHS)
def test_training_step_under_autocast(arch):
    """Loss and gradients under bf16 autocast: finite, fp32 gradients, close to the fp32 step's."""
    torch.manual_seed(0)
    model = build(arch).train()
    src, lengths, prev = _inputs(model, B=8)
    tgt = torch.cat([prev[:, 1:], torch.full_like(prev[:, :1], 2)], dim=1)
    results = {}
    for autocast in (False, True):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(1)  # the same dropout masks in both passes
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits, _ = model(src, lengths, prev)
            loss = torch.nn.functional.cross_entropy(model.get_normalized_probs((logits, None), log_probs=True)
                                                     .view(-1, logits.size(-1)), tgt.reshape(-1), reduction="sum")
        loss.backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        assert grads.dtype == torch.float32 and torch.isfinite(grads).all() and torch.isfinite(loss)
        results[autocast] = float(loss), grads
    (l32, g32), (l16, g16) = results[False], results[True]
    assert abs(l16 - l32) / abs(l32) < 0.02, f"{arch}: loss {l16} under autocast against {l32} in fp32"
    cos = torch.nn.functional.cosine_similarity(g16, g32, dim=0).item()
    assert cos > 0.98, f"{arch}: gradient under autocast has cosine {cos} to the fp32 gradient"


def _task_step(scan_bin, extra):
    """One CompgenTask.train_step of a tiny rel-uni model on scan_bin; the dtypes its Linear layers computed in."""
    task, model, criterion = build_task(scan_bin, "rel_uni_transformer_scan", extra)
    sample = first_batch(task, "train")
    dtypes = set()
    hooks = [m.register_forward_hook(lambda m, i, o: dtypes.add(o.dtype))
             for m in model.modules() if isinstance(m, torch.nn.Linear)]

    class Backward:  # what fairseq's optimizer wrapper does in train_step
        @staticmethod
        def backward(loss):
            loss.backward()

    loss, _, _ = task.train_step(sample, model, criterion, Backward, update_num=0)
    for h in hooks:
        h.remove()
    return float(loss), dtypes, model


def test_task_flag_trains_under_autocast_with_fp32_weights(scan_bin):
    loss32, dtypes32, _ = _task_step(scan_bin, [])
    loss16, dtypes16, model = _task_step(scan_bin, ["--autocast-bf16"])
    assert dtypes32 == {torch.float32} and dtypes16 == {torch.bfloat16}
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters()
               if p.grad is not None)
    assert abs(loss16 - loss32) / loss32 < 0.02


def test_task_flag_refuses_half_weights(scan_bin):
    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.tasks.autocast import autocast_criterion

    model = build("compgen_transformer").to(torch.bfloat16)
    with pytest.raises(UsageError, match="--autocast-bf16 needs float32 weights"):
        autocast_criterion(object(), model, True)


def test_task_flag_refuses_amp():
    """--amp: fairseq wraps the optimizer in its AMPOptimizer (CUDA fp16 autocast, loss scaler); the two mixed
    precisions are not nested."""
    from fairseq.optim.amp_optimizer import AMPOptimizer

    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.tasks.autocast import autocast_criterion

    model = build("compgen_transformer")
    with pytest.raises(UsageError, match="--autocast-bf16 and --amp are two mixed precisions"):
        autocast_criterion(object(), model, True, AMPOptimizer.__new__(AMPOptimizer))
    assert autocast_criterion("criterion", model, False, AMPOptimizer.__new__(AMPOptimizer)) == "criterion"
