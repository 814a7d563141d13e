"""ALiBi: Press, Smith, Lewis (2022), "Train Short, Test Long: Attention with Linear Biases Enables Input Length
Extrapolation" (ICLR), §3.

No position embeddings anywhere; every head h (1-based, of H) adds a fixed penalty linear in the distance to its
logits, after the 1/sqrt(d_head) scaling (the paper's §3 formula omits the scaling; the authors' code adds the bias
to the mask of the scaled scores):

    logit_ij = q_i . k_j / sqrt(d_head)  +  m_h * [-(i-1), ..., -1, 0]_j  =  ... - m_h * (i - j)     (§3)

    m_h = 2^(-8h/H)   "for n heads, our set of slopes is the geometric sequence that starts at 2^(-8/n) and uses
                       that same value as its ratio" (§3): 1/2, 1/4, ..., 1/256 for 8 heads

The paper states that rule for every head count H and trained only powers of two; its authors' code uses another
rule when H is not a power of two (the slopes of the largest power of two below H, then every other slope of twice
that power). We follow the paper's text for every H (the presets have 8 heads, where both agree).

The paper's form is causal (decoder self-attention, j <= i). The bidirectional encoder uses the symmetric form
- m_h * |i - j| (our choice: the paper defines the causal form only; both agree on every pair a causal query
sees). No parameters, nothing in the state_dict.
"""
from typing import Optional

import torch
from torch import Tensor

from fairseq_compgen.modules.positions.base import AttentionPosition, relative_distances
from fairseq_compgen.modules.positions.registry import DECODER_SELF, ENCODER_SELF, register_position


def alibi_slopes(num_heads: int) -> Tensor:
    """m_h = 2^(-8h/H), h = 1..H (Press et al. §3, for every H): [H]."""
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
