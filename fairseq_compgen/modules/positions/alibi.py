"""ALiBi: Press, Smith, Lewis (2022), "Train Short, Test Long: Attention with Linear Biases Enables Input Length
Extrapolation", §3.

No position embeddings; every head h (1-based, of H) adds a fixed penalty linear in the distance to its logits:

    logit_ij = q_i . k_j / sqrt(d_head)  -  m_h * (i - j),      m_h = 2^(-8h/H)     (the paper's slopes)

in the causal decoder (j <= i). The bidirectional encoder uses the symmetric form  - m_h * |i - j|  (our choice:
the paper only defines the causal form; both are the same on the decoder's unmasked pairs). For H a power of two
these are the paper's geometric slopes 2^(-8/H), 2^(-16/H), ..., 2^(-8); for other H we keep the formula
2^(-8h/H) (the paper interpolates between powers of two instead). No parameters, nothing in the state_dict.
"""
from typing import Optional

import torch
from torch import Tensor

from fairseq_compgen.modules.positions.base import AttentionPosition, relative_distances
from fairseq_compgen.modules.positions.registry import DECODER_SELF, ENCODER_SELF, register_position


def alibi_slopes(num_heads: int) -> Tensor:
    """m_h = 2^(-8h/H), h = 1..H: [H]."""
    return torch.pow(2.0, -8.0 * torch.arange(1, num_heads + 1, dtype=torch.float64) / num_heads).float()


@register_position("alibi", sites=(ENCODER_SELF, DECODER_SELF), paper="ALiBi: Press et al. 2022 §3",
                   help="a fixed penalty -m_h |i-j| per head on the logits, slopes m_h = 2^(-8h/H), no "
                        "position embeddings (symmetric in the encoder)")
class ALiBi(AttentionPosition):
    def __init__(self, embed_dim: int, num_heads: int, causal: bool):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)  # [H]

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Tensor:
        distance = relative_distances(q_pos, k_pos).abs().to(q.dtype)  # [Tq, Tk]
        return -self.slopes.to(q.dtype)[:, None, None] * distance  # [H, Tq, Tk], added after the 1/sqrt(d) scale
