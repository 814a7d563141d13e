"""CoPE, contextual position encoding: Golovneva, Wang, Weston, Sukhbaatar (2024), "Contextual Position Encoding:
Learning to Count What's Important", §3.

Positions are counted by gates that depend on content, so a position can mean "the k-th word" or "the k-th
sentence" instead of "the k-th token". For a query i and key j <= i (Eq. 3-6):

    g_ij = sigmoid(q_i . k_j)                       (gate: does key j count?)
    p_ij = sum_{t=j}^{i} g_it                       (a fractional position, >= 0)
    e[p_ij] = (p - floor p) e[ceil p] + (1 - p + floor p) e[floor p]      (interpolated learned embeddings)
    logit_ij = q_i . (k_j + e[p_ij]) / sqrt(d_head)

e: [P, d_head] learned per attention module and shared by its heads (P = --cope-max-positions; p is clipped at
P - 1). As the paper does, q_i . e[p] is computed for the P integer positions and interpolated, never e[p] itself.
Causal only (decoder self-attention): the sum from j to i is over the keys a causal query sees. The gates use the
raw q . k (not scaled by 1/sqrt(d_head)), as written in the paper.
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
                   help="contextual positions: gates sigmoid(q.k) summed from key to query, interpolated learned "
                        "position embeddings (causal attention only)", options=(MAX_POSITIONS,))
class ContextualPositions(AttentionPosition):
    def __init__(self, embed_dim: int, num_heads: int, causal: bool, max_positions: int = 64):
        super().__init__()
        if not causal:
            raise UsageError("cope is for causal (decoder) self-attention only")
        if max_positions < 2:
            raise UsageError(f"--cope-max-positions must be >= 2, got {max_positions}")
        self.embedding = nn.Parameter(torch.randn(max_positions, embed_dim // num_heads) * (embed_dim // num_heads) ** -0.5)  # e: [P, dh]

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Tensor:
        """q [B, H, Tq, dh], k [B, H, Tk, dh] (every key so far) -> scale * q_i . e[p_ij]: [B, H, Tq, Tk]."""
        gates = torch.sigmoid(q @ k.transpose(-1, -2))  # [B, H, Tq, Tk]
        gates = gates.masked_fill(k_pos[None, :] > q_pos[:, None], 0.0)  # keys after the query do not count
        p = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=self.embedding.size(0) - 1)  # [B, H, Tq, Tk]: sum_{t>=j}
        lo = p.floor()
        w = p - lo  # [B, H, Tq, Tk] weight of the ceiling
        z = q @ self.embedding.to(q.dtype).t()  # [B, H, Tq, P]: q_i . e[n] for every integer n
        z_lo = z.gather(-1, lo.long())  # [B, H, Tq, Tk]
        z_hi = z.gather(-1, p.ceil().long())  # [B, H, Tq, Tk]
        return scale * (w * z_hi + (1 - w) * z_lo)
