"""Say in one line that training diverged, and where, instead of fairseq's NaN-detector traceback.

A NaN/Inf loss used to end a run with a 60-line traceback whose last line is a `StopIteration` from fairseq's NaN
detector re-running the batch with hooks; the cause (the loss or gradients became NaN at update N) sat far above
it. The tasks call :func:`check_loss` after every training forward/backward pass (:class:`CheckedTrainStep`): a
non-finite loss in an fp32 model raises a UsageError naming the update, the loss, the learning rate and what to try. (With --fp16/--amp fairseq's
loss scaler handles overflows itself, so half-precision models are left to it; finite losses with non-finite
gradients still take fairseq's own path.) Nothing is saved after the failing update but fairseq's crash.pt, so
checkpoint_last.pt stays the last finite state; :func:`check_weights` refuses to resume from a checkpoint whose weights are already NaN/Inf.
"""
import math

import torch

from fairseq_compgen.errors import UsageError
from fairseq_compgen.tasks import batch_chunks
from fairseq_compgen.tasks.autocast import autocast_criterion
from fairseq_compgen.tasks.clocks import log_clocks


class CheckedTrainStep:
    """A task's train_step, for the tasks of this package (mixed in before fairseq's task class): the batch in
    --batch-chunks chunks when set (tasks/batch_chunks.py: fairseq's train_step per chunk, the sums returned), the
    criterion under --autocast-bf16 when set (tasks/autocast.py), then a non-finite loss refused in one line
    (check_loss below), then the training clocks logged (tasks/clocks.py)."""

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        criterion = autocast_criterion(criterion, model, self.cfg.autocast_bf16, optimizer)
        k = getattr(self.cfg, "batch_chunks", 1)  # the compgen task's flag
        chunks = batch_chunks.split_by_length(sample, k, self.target_dictionary.pad()) if k > 1 else [sample]
        outs = [super(CheckedTrainStep, self).train_step(chunk, model, criterion, optimizer, update_num, ignore_grad)
                for chunk in chunks]
        out = outs[0] if len(outs) == 1 else (sum(o[0] for o in outs), sum(o[1] for o in outs),
                                              batch_chunks.merge_logging([o[2] for o in outs]))
        check_loss(out[0], model, optimizer, update_num, ignore_grad)
        log_clocks()
        return out


def check_loss(loss, model, optimizer, update_num: int, ignore_grad: bool) -> None:
    if ignore_grad or not torch.is_tensor(loss):
        return
    if next(model.parameters()).dtype != torch.float32:  # fp16/bf16: fairseq's loss scaler decides
        return
    value = float(loss.detach())
    if math.isfinite(value):
        return
    lr = optimizer.get_lr() if optimizer is not None else float("nan")
    raise UsageError(f"training diverged at update {update_num + 1}: the loss is {value} (learning rate {lr:g}); "
                     f"the checkpoints saved before it are unaffected: rerun with a lower --lr, a --clip-norm or "
                     f"more --warmup-updates")


def check_weights(state: dict, path: str) -> None:
    """Refuse a checkpoint (loaded `state`) whose model weights hold NaN or Inf."""
    bad = [k for k, v in (state.get("model") or {}).items()
           if torch.is_tensor(v) and v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        updates = (state.get("optimizer_history") or [{}])[-1].get("num_updates")
        raise UsageError(f"{path} holds NaN/Inf weights ({len(bad)} tensors, e.g. {bad[0]}; saved at update "
                         f"{updates}): training had diverged; resume from an earlier checkpoint (cp it over {path}) "
                         f"or start again with a lower --lr")
