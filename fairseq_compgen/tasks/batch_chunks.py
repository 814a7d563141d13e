"""`--batch-chunks K`: compute each training batch as K chunks of sentences of similar length, one after the other,
summing their gradients: the same update as the whole batch, with less padding.

Why: batches drawn at random (`--random-batches`, tasks/batching.py; the sampling of Csordás et al. (2021)'s code)
mix short and long sentences, and a padded batch costs as much as its longest sentence everywhere. On SCAN's
length split (batch 256) a shuffle pads the targets to 1.89x the positions of fairseq's length-sorted batches, and
Rel. Uni. trained 1.67x slower per update (docs/results.md, the campaign's step 12). Sorting the batch's sentences by
target length and cutting them into K chunks gives each chunk its own, shorter, padding.

Why it is the same update: fairseq's losses are sums over target tokens (label-smoothed or plain cross entropy),
divided by the update's total `sample_size` only after backward (the trainer's multiply_grads), so the gradient of
the whole batch is the sum of its chunks' gradients; `train_step` returns the summed loss, sample size and logging
fields, as for the whole batch. Padding changes nothing a model computes for a real token (the masks). What differs:
float rounding (sums in another order) and dropout masks (drawn per chunk, from the same distribution). A loss term
that is a mean over the batch's sentences (the orthogonality loss of Park & Kim 2024, criterions/orthogonality.py)
reads the whole batch's totals from the chunk (`BATCH_TOTALS`) so that its weight stays the batch's. Randomized
positions (`--random-positions`) are refused with K > 1: they are drawn per forward pass, for its length (check).

Validation is not chunked (fairseq's validation batches are already length-sorted). K = 1, the default, leaves the
batch as it is.
"""
from dataclasses import dataclass, field
from typing import Any, Dict, List

import torch
from fairseq.dataclass import FairseqDataclass

from fairseq_compgen.errors import UsageError

BATCH_TOTALS = "batch_totals"  # in a chunk: {"ntokens", "nsentences"} of the batch it was cut from
PADDED = ("src_tokens", "prev_output_tokens", "target")  # [B, T] token tensors whose all-pad columns a chunk drops


@dataclass
class BatchChunksConfig(FairseqDataclass):
    batch_chunks: int = field(default=1, metadata={
        "help": "compute each training batch as this many chunks of sentences of similar target length, summing "
                "their gradients: the whole batch's update with less padding (for --random-batches, whose batches "
                "mix lengths); 1 (default): the batch as it is"})


def check(k: int, random_positions: int = 0) -> None:
    """K, and what it cannot be combined with: randomized positions (--random-positions, Ruoss et al. 2023) are
    drawn per forward pass for its length, so each chunk would draw its own, for its own length, and no longer the
    whole batch's draw (not the same update, nor the same distribution of positions)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"--batch-chunks {k}: expected a positive whole number (1: no chunks)")
    if k > 1 and random_positions:
        raise UsageError(f"--batch-chunks {k} with --random-positions {random_positions}: each chunk would draw its "
                         f"own positions for its own length, not the batch's: expected one of the two")


def _take(value: Any, index: torch.Tensor, batch: int) -> Any:
    """`value` (a sample field) restricted to the sentences `index`: tensors whose first dimension is the batch are
    indexed, dicts recursively; anything else (counts) is left to the caller."""
    if torch.is_tensor(value) and value.dim() > 0 and value.size(0) == batch:
        return value.index_select(0, index)
    if isinstance(value, dict):
        return {k: _take(v, index, batch) for k, v in value.items()}
    return value


def _trim(value: Any, pad: int) -> Any:
    """Drop the columns that are padding in every row of the PADDED token tensors (left or right padding: the rest
    stays one contiguous block)."""
    if isinstance(value, dict):
        return {k: (v[:, (v != pad).any(0)] if k in PADDED and torch.is_tensor(v) and v.dim() == 2 else _trim(v, pad))
                for k, v in value.items()}
    return value


def split_by_length(sample: Dict[str, Any], k: int, pad: int) -> List[Dict[str, Any]]:
    """`sample` (a fairseq translation batch) as up to `k` chunks of sentences sorted by target length, each with
    its own padding, `ntokens`, `nsentences` and the whole batch's totals (BATCH_TOTALS); `[sample]` when k == 1."""
    if k <= 1 or not sample or "target" not in sample:
        return [sample]
    target = sample["target"]  # [B, T]
    batch = target.size(0)
    lengths = (target != pad).sum(1)  # [B]
    order = torch.sort(lengths, stable=True).indices
    totals = {"ntokens": sample["ntokens"], "nsentences": batch}
    chunks = []
    for index in order.tensor_split(min(k, batch)):
        chunk = _trim(_take(sample, index, batch), pad)
        chunk["ntokens"] = int((chunk["target"] != pad).sum())
        chunk["nsentences"] = len(index)
        chunk[BATCH_TOTALS] = totals
        chunks.append(chunk)
    return chunks


def merge_logging(outputs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The chunks' logging outputs as one, as the whole batch's: numbers and tensors summed (the criteria here log
    sums only: logging_outputs_can_be_summed), anything else taken from the first."""
    if len(outputs) == 1:
        return outputs[0]
    merged = dict(outputs[0])
    for out in outputs[1:]:
        for key, value in out.items():
            if isinstance(value, (int, float)) or torch.is_tensor(value):
                merged[key] = merged.get(key, 0) + value
    return merged
