"""Learned absolute positions: one trained vector per position added to the token embedding (Gehring et al. 2017,
"Convolutional Sequence to Sequence Learning" §3.1; the usual baseline of length-generalization studies).

    H[i] = scale(E[w_i]) + P[i],   P: [max_positions, d] ~ N(0, d^-1/2) (fairseq's LearnedPositionalEmbedding init)

Positions count from the first real token (left padding skipped). A position >= --learned-max-positions has no
vector: that is a one-line error, not a silent clamp (it is the length-generalization failure this baseline has).
"""
from typing import Optional

import torch.nn as nn
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.positions.registry import INPUT, Option, register_position

MAX_POSITIONS = Option("learned_max_positions", "max_positions", int, 256,
                       "how many positions --absolute-positions learned has vectors for", metavar="N")


@register_position("learned", sites=(INPUT,), paper="Gehring et al. 2017 §3.1", options=(MAX_POSITIONS,),
                   help="a learned vector per absolute position added to the embeddings")
class LearnedPositions(nn.Module):
    """positions [B, T] (0-based) -> [B, T, dim]; parameters: weight [max_positions, dim]."""

    def __init__(self, embed_dim: int, padding_idx: int, scaling: Optional[str], max_positions: int = 256):
        super().__init__()
        if max_positions < 1:
            raise UsageError(f"--learned-max-positions must be >= 1, got {max_positions}")
        self.table = nn.Embedding(max_positions, embed_dim)
        nn.init.normal_(self.table.weight, 0.0, embed_dim ** -0.5)

    def forward(self, pos: Tensor) -> Tensor:
        if pos.numel() and int(pos.max()) >= self.table.num_embeddings:
            raise UsageError(f"position {int(pos.max())} beyond --learned-max-positions {self.table.num_embeddings}")
        return self.table(pos)
