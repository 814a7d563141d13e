"""Sinusoidal absolute positions (Vaswani et al. 2017, Eq. 1), in the two layouts our presets use.

Csordás, Irie, Schmidhuber (2021) §3.3 (Eq. 1) and App. D, interleaved:

    P[pos, 2k]   = sin(pos / 10000^(2k/d))
    P[pos, 2k+1] = cos(pos / 10000^(2k/d))

fairseq's `SinusoidalPositionalEmbedding` (Chaabouni et al. 2021 §3, with `--embedding-scaling fairseq`):

    P'[p, k] = sin(p w_k), P'[p, k + d/2] = cos(p w_k), w_k = 10000^(-k / (d/2 - 1)), k < d/2

i.e. the sines in the first half and the cosines in the second, a frequency step of ln(10000) / (d/2 - 1), and
positions offset by padding_idx + 1 (fairseq's `make_positions`). `sinusoid` also serves Transformer-XL's
relative encodings (relative_txl.py) at signed distances. The embedding scalings are in modules/embedding.py.
"""
import math
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_compgen.modules.positions.registry import INPUT, register_position

def sinusoid(positions: Tensor, dim: int) -> Tensor:
    """Interleaved sinusoids of Eq. 1 at (possibly negative, possibly fractional) `positions`.

    positions: [...] -> returns [..., dim] (float32).
    """
    assert dim % 2 == 0, f"sinusoidal encodings need an even dimension, got {dim}"
    inv_freq = torch.exp(
        torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32) * (-math.log(10000.0) / dim)
    )  # [dim/2]
    angles = positions.to(torch.float32).unsqueeze(-1) * inv_freq  # [..., dim/2]
    out = torch.stack((angles.sin(), angles.cos()), dim=-1)  # [..., dim/2, 2]
    return out.flatten(-2)  # [..., dim]: sin on even channels, cos on odd


def sinusoid_fairseq(positions: Tensor, dim: int) -> Tensor:
    """fairseq's sinusoid layout (see the module docstring) at `positions` (already offset by padding_idx + 1).

    positions: [...] -> returns [..., dim] (float32): sin on channels [0, dim/2), cos on [dim/2, dim).
    """
    assert dim % 2 == 0 and dim >= 4, f"fairseq's sinusoids need an even dimension >= 4, got {dim}"
    half = dim // 2
    inv_freq = torch.exp(torch.arange(half, device=positions.device, dtype=torch.float32)
                         * (-math.log(10000.0) / (half - 1)))  # [dim/2]
    angles = positions.to(torch.float32).unsqueeze(-1) * inv_freq  # [..., dim/2]
    return torch.cat((angles.sin(), angles.cos()), dim=-1)  # [..., dim]


@register_position("sinusoidal", sites=(INPUT,), paper="Vaswani et al. 2017; Csordás et al. 2021 §3.3",
                   help="sinusoidal absolute positions added to the embeddings (fairseq's layout with "
                        "--embedding-scaling fairseq)")
class SinusoidalPositions(nn.Module):
    """positions [B, T] (0-based) -> [B, T, dim]; no parameters."""

    def __init__(self, embed_dim: int, padding_idx: int, scaling: Optional[str]):
        super().__init__()
        self.dim, self.offset, self.fairseq = embed_dim, padding_idx + 1, scaling == "fairseq"

    def forward(self, pos: Tensor) -> Tensor:
        if self.fairseq:
            return sinusoid_fairseq(pos + self.offset, self.dim)
        return sinusoid(pos, self.dim)
