"""CoPE, contextual position encoding: Golovneva, Wang, Weston, Sukhbaatar (2024), "Contextual Position Encoding:
Learning to Count What's Important", §3 and the PyTorch listing of the paper (classes CoPE and SelfAttn).

Positions are counted by gates that depend on content, so a position can mean "the k-th word" or "the k-th
sentence" instead of "the k-th token". For a query i and key j <= i (the paper writes the formulas without the
1/sqrt(d) scaling; where it goes is the listing's):

    g_it = sigmoid(q_i . k_t / sqrt(d_head))        (gate: does key t count? the listing gates the scaled,
                                                      masked logits, so a key after the query counts 0)
    p_ij = sum_{t=j}^{i} g_it                       (a fractional position, >= 0; clipped at P - 1)
    e[p] = (p - floor p) e[ceil p] + (1 - p + floor p) e[floor p]      (interpolated learned embeddings)
    logit_ij = q_i . k_j / sqrt(d_head)  +  q_i . e[p_ij]                (the position term is not scaled)

e: [P, d_head], P = --cope-max-positions (the paper's p_max, npos_max in the listing; 64 here, our choice), one
table per attention layer shared by its heads (the listing's module works on one head's q and k, heads folded
into the batch), initialised to zeros as in the listing. Gates and positions are per head (each head has its own
q and k). As the paper does, q_i . e[p] is computed for the P integer positions and interpolated, never e[p]
itself. Causal only (decoder self-attention), as in the paper: the sum from j to i is over the keys a causal query
sees. Step by step, a new query's positions are computed over every cached key, which equals the full pass.
"""
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.positions.base import AttentionPosition
from fairseq_compgen.modules.positions.registry import DECODER_SELF, Option, register_position

MAX_POSITIONS = Option("cope_max_positions", "max_positions", int, 64,
                       "how many integer positions CoPE has embeddings for (fractional positions are clipped to "
                       "this minus 1)", metavar="P")


@register_position("cope", sites=(DECODER_SELF,), paper="CoPE: Golovneva et al. 2024 §3",
                   help="contextual positions: gates sigmoid(q.k/sqrt(d)) summed from key to query, interpolated learned "
                        "position embeddings (causal attention only)", options=(MAX_POSITIONS,))
class ContextualPositions(AttentionPosition):
    def __init__(self, embed_dim: int, num_heads: int, causal: bool, max_positions: int = 64):
        super().__init__()
        if not causal:
            raise UsageError("cope is for causal (decoder) self-attention only")
        if max_positions < 2:
            raise UsageError(f"--cope-max-positions must be >= 2, got {max_positions}")
        self.embedding = nn.Parameter(torch.zeros(max_positions, embed_dim // num_heads))  # e: [P, dh]

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Tensor:
        """q [B, H, Tq, dh], k [B, H, Tk, dh] (every key so far) -> q_i . e[p_ij] (unscaled): [B, H, Tq, Tk]."""
        gates = torch.sigmoid(scale * (q @ k.transpose(-1, -2)))  # [B, H, Tq, Tk], on the scaled logits
        gates = gates.masked_fill(k_pos[None, :] > q_pos[:, None], 0.0)  # keys after the query do not count
        p = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=self.embedding.size(0) - 1)  # [B, H, Tq, Tk]: sum_{t>=j}
        lo = p.floor()
        w = p - lo  # [B, H, Tq, Tk] weight of the ceiling
        z = q @ self.embedding.to(q.dtype).t()  # [B, H, Tq, P]: q_i . e[n] for every integer n
        z_lo = z.gather(-1, lo.long())  # [B, H, Tq, Tk]
        z_hi = z.gather(-1, p.ceil().long())  # [B, H, Tq, Tk]
        return w * z_hi + (1 - w) * z_lo
