"""Randomized positional encodings: Ruoss, Delétang, Genewein, Grau-Moya, Csordás, Bennani, Legg, Veness (2023),
"Randomized Positional Encodings Boost Length Generalization of Transformers" (ACL), §3.

The positions of a length-T sequence are not 0..T-1 but a sorted random subset, drawn without replacement, of
[0, N) for an N (the paper's L, --random-positions N) larger than any test length, so that the positions of
longer test sequences were all seen in training. It changes the positions every position-taking encoding receives
(absolute sinusoidal or learned, RoPE, ALiBi, FIRE, t5, txl, ...): the token embedding reads its positions from the
sample, and every self-attention of the stack gets the same sample. Cross-attention keeps plain positions.

By column: the token in column c gets positions[c], in the embedding and in every self-attention alike. A decoder
row (padded on the right) thus takes the sample's first entries; an encoder row of L real tokens after `first` pads
(fairseq pads sources on the left) takes its last L, positions[first:]. Plain positions instead count from each
row's first real token (0..L-1), which only the shift-invariant encodings ignore; FIRE, whose normaliser is not, reads
them per row. (Until 2026-11-26 the embedding and FIRE gave a padded row's n-th real token positions[n] under
randomized positions, the other encodings positions[first + n]; no recorded run combined them: the one randomized
preset, random_rope, has no absolute positions.)

Deviation, stated plainly: we sample in training only and use 0..T-1 at evaluation. The authors sample at test
time too (their code draws the subset in every forward pass, evaluation included, and they confirm it in
google-deepmind/randomized_positional_encodings issue #1: "we also randomize at test time"), on models that emit
the whole output in one pass. Here the decoder is autoregressive (greedy and beam search step by step over a
cache), and the evaluation is meant to be deterministic; sampling at test time would need one subset per
decoded sentence fixed before its length is known. Models trained with N well above the test lengths therefore
see, at evaluation, consecutive positions that training showed only as sparse subsets (relative encodings see
distance 1 between neighbours, which in training were typically about N/T apart).

One sample per batch and stack (encoder, decoder), shared by the batch's sequences, as in the authors' code (one
subset per call, broadcast over the batch; it also keeps every encoding's bias [Tq, Tk]). Their batches hold
sequences of one length; ours are padded, and the sample has the batch's longest length T. A row of L < T tokens
therefore gets L entries of a T-subset, not an L-subset of its own: its positions are spread over about N L / T, not
over N (mean gap N / (T + 1), not N / (L + 1)). fairseq's batches, sorted by length, keep L near T; batches drawn
at random (`--random-batches`) mix lengths and widen the difference. Off (0) by default.
Refused where nothing would take the positions: NoPE everywhere (CoPE's positions come from content and count
too), linear or convolutional self-attention.
"""
from typing import Optional

import torch
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.positions.registry import Option, register_option

RANDOM_POSITIONS = register_option(
    Option("random_positions", "random_positions", int, 0, "randomized positions: at training, positions are a "
           "sorted random subset of [0, N) (0: off; evaluation uses 0..T-1, where the paper samples too)",
           metavar="N"),
    paper="Ruoss et al. 2023 §3; for every encoding that takes positions")


def check(n: int, encodings) -> int:
    """--random-positions N for a model whose input and self-attention encodings are `encodings`."""
    if n < 0:
        raise UsageError(f"--random-positions must be >= 0, got {n}")
    if n and all(e in ("none", "cope") for e in encodings):
        raise UsageError(f"--random-positions {n} needs an encoding that takes positions (got {', '.join(encodings)})")
    return n


def sample_positions(length: int, n: int, device=None, generator: Optional[torch.Generator] = None) -> Tensor:
    """A sorted random subset of [0, n) of size `length`: [length] long."""
    if length > n:
        raise UsageError(f"--random-positions {n} is smaller than a sequence of length {length}")
    return torch.randperm(n, device=device, generator=generator)[:length].sort().values
