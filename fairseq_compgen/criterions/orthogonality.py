"""Orthogonality loss on the encoder's Values: Park & Kim (2024) §4.2.

    V̄_n = V_n / (‖V_n‖₂ + ε)          L_orth = ‖V̄ V̄ᵀ − I‖²_F          L = L_task + λ · L_orth

`--criterion label_smoothed_cross_entropy_with_orthogonality --orthogonality-lambda 1e-4` (the paper's λ for SCAN,
Mathematics and PCFG; sort-of-CLEVR used 1e-3). L_task is fairseq's label-smoothed cross entropy
(`--label-smoothing 0`, the default, is the paper's token-wise cross entropy). Needs `--self-attn-type linear`.

What the paper leaves open, and what we chose:
* Which values: the Values V = W_v x of the encoder's (non-causal) linear self-attention, per head (N × d_head,
  the paper writes V̄ ∈ R^{N×d} with d the size of the vectors its attention formulas use, i.e. per head), as
  projected (before padding is zeroed; there is no dropout on them). Only the encoder (the paper: "only to the
  encoder ... non-causal configuration"); not decoder self-attention nor cross-attention.
* Reduction: for each sentence, head and layer application, the Frobenius sum over the N × N entries (a sum, as
  written, so it grows with N²); the mean over sentences and heads; the SUM over the layer applications of the
  encoder (a Universal Transformer applies its one layer n times: each application is its own term).
* Padding: pad rows and columns are dropped from V̄V̄ᵀ and from I (N = the sentence's real length).
* ε = 1e-6.
* Scale: fairseq divides the summed loss by `sample_size` (target tokens), so the criterion adds
  λ · L_orth · sample_size to the summed cross entropy: the gradient is that of mean-CE + λ · L_orth. A chunk of a
  batch (`--batch-chunks`, tasks/batch_chunks.py) adds λ · L_orth(chunk) · n_chunk · sample_size(batch) / n(batch)
  (n: sentences), so that the chunks' terms sum to the whole batch's.
* Logged separately as `orthogonality` (L_orth per sentence batch, averaged over batches by sentences);
  `loss` includes λ · L_orth, `nll_loss` does not.
"""
import math
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import torch
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.logging import metrics
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.linear_attention import EPS, LinearAttention
from fairseq_compgen.tasks.batch_chunks import BATCH_TOTALS


def orthogonality_loss(values: Tensor, padding_mask: Optional[Tensor] = None, eps: float = EPS) -> Tensor:
    """values [B, H, N, d] (per-head Values), padding_mask [B, N] (True at pads) -> scalar:
    mean over b, h of ‖V̄ V̄ᵀ − I‖²_F over the non-pad rows and columns."""
    v = values.float()
    vb = v / (v.norm(dim=-1, keepdim=True) + eps)
    gram = torch.matmul(vb, vb.transpose(-1, -2))  # [B, H, N, N]
    gram = gram - torch.eye(v.size(-2), device=v.device, dtype=v.dtype)
    if padding_mask is not None:
        keep = ~padding_mask
        gram = gram * (keep[:, None, :, None] & keep[:, None, None, :]).to(gram.dtype)
    return gram.pow(2).sum(dim=(-1, -2)).mean()


def encoder_value_recorders(model) -> List[LinearAttention]:
    """The linear self-attentions of the encoder (one per layer, or the one shared layer's)."""
    mods = [m for m in model.encoder.modules() if isinstance(m, LinearAttention)]
    if not mods:
        raise UsageError("the orthogonality loss needs linear attention in the encoder (--self-attn-type linear)")
    return mods


def run_recording_values(model, net_input) -> Tuple[object, List[Tuple[Tensor, Optional[Tensor]]]]:
    """model(**net_input), and the (values, padding mask) of every encoder self-attention application."""
    mods = encoder_value_recorders(model)
    for m in mods:
        m.record_values = True
        m.recorded.clear()
    try:
        net_output = model(**net_input)
        recorded = [vm for m in mods for _, vm in sorted(m.recorded.items())]
    finally:
        for m in mods:
            m.record_values = False
            m.recorded.clear()
    return net_output, recorded


@dataclass
class LabelSmoothedCrossEntropyWithOrthogonalityConfig(LabelSmoothedCrossEntropyCriterionConfig):
    orthogonality_lambda: float = field(
        default=1e-4,
        metadata={"help": "weight λ of the orthogonality loss ‖V̄V̄ᵀ − I‖²_F on the L2-normalized Values of the "
                          "encoder's linear self-attention, summed over layer applications, mean over sentences "
                          "and heads (Park & Kim 2024 §4.2; 1e-4 for SCAN, Mathematics, PCFG)"},
    )


@register_criterion("label_smoothed_cross_entropy_with_orthogonality",
                    dataclass=LabelSmoothedCrossEntropyWithOrthogonalityConfig)
class LabelSmoothedCrossEntropyWithOrthogonality(LabelSmoothedCrossEntropyCriterion):
    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0, report_accuracy=False,
                 orthogonality_lambda=1e-4):
        if not (math.isfinite(orthogonality_lambda) and orthogonality_lambda >= 0):  # nan: a divergence blamed on --lr
            raise UsageError(f"--orthogonality-lambda {orthogonality_lambda}: expected a finite weight >= 0 (the "
                             f"paper's 1e-4; 0 trains without the loss)")
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        self.orthogonality_lambda = orthogonality_lambda

    def forward(self, model, sample, reduce=True):
        net_output, recorded = run_recording_values(model, sample["net_input"])
        loss, nll_loss = self.compute_loss(model, net_output, sample, reduce=reduce)
        orth = sum(orthogonality_loss(v, mask) for v, mask in recorded)  # sum over layer applications
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        nsentences = sample["target"].size(0)
        batch = sample.get(BATCH_TOTALS)  # a chunk of a batch (--batch-chunks): weighted as in the whole batch
        weight = sample_size if batch is None else nsentences * (
            batch["nsentences"] if self.sentence_avg else batch["ntokens"]) / batch["nsentences"]
        loss = loss + self.orthogonality_lambda * orth * weight
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "orthogonality": orth.data * nsentences,
            "ntokens": sample["ntokens"],
            "nsentences": nsentences,
            "sample_size": sample_size,
        }
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, net_output, sample)
            logging_output["n_correct"] = n_correct.item()
            logging_output["total"] = total.item()
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        orth = sum(log.get("orthogonality", 0) for log in logging_outputs)
        nsentences = sum(log.get("nsentences", 0) for log in logging_outputs)
        if nsentences > 0:
            metrics.log_scalar("orthogonality", orth / nsentences, nsentences, round=3)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
