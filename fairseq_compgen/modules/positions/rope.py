"""Rotary position embedding (RoPE): Su, Lu, Pan, Murtadha, Wen, Liu (2021), "RoFormer: Enhanced Transformer with
Rotary Position Embedding", §3.2.2 (Eq. 14-15) and §3.4.2 (Eq. 34); and xPos: Sun, Dong, Patra, Ma, Huang,
Benhaim, Chaudhary, Song, Wei (2023), "A Length-Extrapolatable Transformer" (ACL), §3.

RoPE rotates each pair of channels of every head's query and key by an angle proportional to the token's absolute
position, so that q_i . k_j depends on positions only through i - j (the values are not rotated):

    R_p x = [x_2k cos(p w_k) - x_2k+1 sin(p w_k),  x_2k sin(p w_k) + x_2k+1 cos(p w_k)]_k,  w_k = theta^(-2k/d_head)

    q_i <- R_i q_i,  k_j <- R_j k_j      (k = 0..d_head/2-1; theta = --rope-theta, 10000 in Eq. 15)

Pairing: adjacent channels (2k, 2k+1), the "interleaved" layout of Eq. 34 (the other common layout pairs k with
k + d_head/2; both are RoPE, they differ by a fixed permutation of the channels, i.e. of the q/k projections).

xPos (§3) multiplies in a per-pair exponential decay, zeta_k = (2k/d_head + gamma) / (1 + gamma) (that is,
(k/(d/2) + gamma)/(1 + gamma)), gamma = 0.4:

    q_i <- zeta^( i / B) * R_i q_i,  k_j <- zeta^(-j / B) * R_j k_j,  so q_i . k_j carries zeta^((i-j)/B)

(B = --xpos-scale-base, 512 in the paper), with the rotation, frequencies and pairing of RoPE above; the authors'
code (torchscale, `XPOS`) scales in the same way: queries by zeta^(i/B) <= 1, keys by zeta^(-j/B) >= 1. zeta^((i-j)/B) grows for j > i, so xPos
is for causal attention only (decoder self-attention). Not used: the paper's blockwise causal attention, an
inference-time change of the attention mask (§3), and the authors' centring of positions around 0 (a shift that
leaves every q_i . k_j unchanged). Both encodings act in self-attention only. Each query and key is rotated at its
absolute position, a key once, when it enters the decoding cache (the attention core caches keys as rotated), so
step-by-step decoding equals the full pass. No parameters.
"""
import math
from typing import Tuple

import torch
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.positions.base import AttentionPosition
from fairseq_compgen.modules.positions.registry import DECODER_SELF, ENCODER_SELF, Option, register_position

THETA = Option("rope_theta", "theta", float, 10000.0, "base theta of the rotary frequencies theta^(-2k/d_head)",
               metavar="THETA")
SCALE_BASE = Option("xpos_scale_base", "scale_base", float, 512.0, "xPos's scale base B (decay zeta^((i-j)/B))",
                    metavar="B")


def rotate_pairs(x: Tensor, angles: Tensor) -> Tensor:
    """x [..., T, d] rotated pairwise by angles [T, d/2] (channel pairs (2k, 2k+1)) -> [..., T, d]."""
    x1, x2 = x[..., 0::2], x[..., 1::2]  # [..., T, d/2] each
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)  # [..., T, d]


@register_position("rope", sites=(ENCODER_SELF, DECODER_SELF), paper="RoPE: Su et al. 2021 §3.4",
                   help="rotary embedding: queries and keys rotated by their absolute positions", options=(THETA,))
class RotaryPositions(AttentionPosition):
    def __init__(self, embed_dim: int, num_heads: int, causal: bool, theta: float = 10000.0):
        super().__init__()
        head_dim = embed_dim // num_heads
        if head_dim % 2:
            raise UsageError(f"rope needs an even head dimension, got {head_dim}")
        if not (math.isfinite(theta) and theta > 0):  # a negative base made every frequency NaN, the loss NaN
            raise UsageError(f"--rope-theta must be a positive number, got {theta}")
        inv_freq = torch.pow(float(theta), -torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)  # w_k: [d_head/2]

    def angles(self, pos: Tensor) -> Tensor:
        return pos.to(torch.float32)[:, None] * self.inv_freq  # [T, d_head/2]

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tuple[Tensor, Tensor]:
        return rotate_pairs(q, self.angles(q_pos)), rotate_pairs(k, self.angles(k_pos))  # [B, H, T, d_head]


@register_position("xpos", sites=(DECODER_SELF,), paper="xPos: Sun et al. 2023 §3",
                   help="rotary embedding with xPos's exponential decay zeta^((i-j)/B) (causal attention only)",
                   options=(THETA, SCALE_BASE))
class XPos(RotaryPositions):
    GAMMA = 0.4

    def __init__(self, embed_dim: int, num_heads: int, causal: bool, theta: float = 10000.0,
                 scale_base: float = 512.0):
        super().__init__(embed_dim, num_heads, causal, theta)
        if not causal:
            raise UsageError("xpos is for causal (decoder) self-attention only")
        if not (math.isfinite(scale_base) and scale_base > 0):  # B = 0: an infinite decay
            raise UsageError(f"--xpos-scale-base must be a positive number, got {scale_base}")
        head_dim = embed_dim // num_heads
        zeta = (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim + self.GAMMA) / (1 + self.GAMMA)
        self.register_buffer("log_zeta", zeta.log().float(), persistent=False)  # [d_head/2]
        self.scale_base = float(scale_base)

    def check_max_positions(self, n: int) -> None:
        # the keys' zeta^(-j/B) overflows float32 (exp > 88) and the queries' zeta^(i/B) underflows: NaN logits
        limit = n * -float(self.log_zeta.min()) / 80.0
        if self.scale_base < limit:
            raise UsageError(f"--xpos-scale-base {self.scale_base:g}: too small for positions up to {n}: zeta^(n/B) "
                             f"leaves float32's range; expected at least {math.ceil(limit)}")

    def decay(self, pos: Tensor, sign: float) -> Tensor:
        """zeta^(sign * pos / B), each value repeated for the two channels of its pair: [T, d_head]."""
        d = torch.exp(sign * pos.to(torch.float32)[:, None] / self.scale_base * self.log_zeta)  # [T, d_head/2]
        return d.repeat_interleave(2, dim=-1)  # [T, d_head]

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tuple[Tensor, Tensor]:
        q, k = super().rotate(q, k, q_pos, k_pos)
        return q * self.decay(q_pos, 1.0).to(q.dtype), k * self.decay(k_pos, -1.0).to(k.dtype)
