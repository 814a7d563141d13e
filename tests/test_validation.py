"""The compgen task's validation step: one forward pass per batch serves the loss and the accuracies,
with the same numbers a separate pass gives."""
import pytest
import torch

from model_helpers import build_task, first_batch
from fairseq_compgen.tasks.greedy import greedy_match_teacher_forced, teacher_forced_exact_match


@pytest.mark.parametrize("criterion", [["--criterion", "cross_entropy"],
                                       ["--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"]])
def test_validation_runs_one_forward_pass_with_the_same_metrics(scan_bin, criterion):
    task, model, crit = build_task(scan_bin, "rel_uni_transformer_scan", criterion)
    sample = first_batch(task, "valid")
    calls = []
    hook = model.register_forward_pre_hook(lambda m, a: calls.append(1))
    loss, _, log = task.valid_step(sample, model, crit)
    hook.remove()
    assert len(calls) == 1, f"validation ran {len(calls)} forward passes on one batch"
    # the same numbers from separate passes (what validation computed before)
    model.eval()
    with torch.no_grad():
        ref_loss, _, _ = crit(model, sample)
        pad, eos = task.tgt_dict.pad(), task.tgt_dict.eos()
        em = int(greedy_match_teacher_forced(model, sample, pad).sum())
        tf = int(teacher_forced_exact_match(model, sample, pad, eos).sum())
    assert torch.equal(loss, ref_loss)
    assert (log["_em_correct"], log["_em_tf_correct"], log["_em_total"]) == (em, tf, sample["target"].size(0))


def test_validation_without_accuracies_runs_only_the_criterion(scan_bin):
    task, model, crit = build_task(scan_bin, "compgen_transformer_scan", ["--no-eval-accuracy", "--no-eval-tf-accuracy"])
    sample = first_batch(task, "valid")
    calls = []
    model.register_forward_pre_hook(lambda m, a: calls.append(1))
    _, _, log = task.valid_step(sample, model, crit)
    assert len(calls) == 1 and "_em_total" not in log
