"""Randomized positional encodings: Ruoss, Delétang, Genewein, Grau-Moya, Csordás, Bennani, Legg, Veness (2023),
"Randomized Positional Encodings Boost Length Generalization of Transformers" (ACL), §3.

During training, the positions of a length-T sequence are not 0..T-1 but a sorted random subset of [0, N) for an N
larger than any test length (--random-positions N), so that the positions of longer test sequences were all seen in
training; at evaluation they are 0..T-1 again. It changes the positions every position-taking encoding receives
(absolute sinusoidal or learned, RoPE, ALiBi, FIRE, t5, txl, ...): the token embedding reads its positions from the
sample, and every self-attention of the stack gets the same sample. Cross-attention keeps plain positions.

One sample per batch and stack (encoder, decoder), shared by the batch's sequences (the paper draws one per
sequence; one per batch keeps every encoding's bias [Tq, Tk]). Off (0) by default. Refused where nothing would
take the positions: NoPE everywhere (CoPE's positions come from content and count too), linear or convolutional
self-attention.
"""
from typing import Optional

import torch
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.positions.registry import Option, register_option

RANDOM_POSITIONS = register_option(
    Option("random_positions", "random_positions", int, 0, "randomized positions: at training, positions are a "
           "sorted random subset of [0, N) (0: off)", metavar="N"),
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
