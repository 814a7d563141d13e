"""FIRE: Li, You, Guruganesh, Ainslie, Ontañón, Zaheer, Sanghai, Yang, Kumar, Bhojanapalli (2024), "Functional
Interpolation for Relative Positions Improves Long Context Transformers" (ICLR), §3 and its PyTorch listing.

A learned function of the progressively interpolated log distance, one output per head, added to the scaled logits:

    b_h(i, j) = f_theta( psi(i - j) / (psi(max(L, i)) + eps) )_h,     psi(x) = log(c x + 1)

f_theta: R -> R^H is an MLP with one hidden layer, Linear(1, hidden), ReLU, Linear(hidden, H), hidden = --fire-hidden
(32 in the paper's listing); positions count from 0. The paper's listing fixes the rest, and we follow it:
c is learned and initialised to 0.1 (kept > 0 as exp(log c); the listing takes |c|); the threshold is
L = |m| * L0 with a learned multiplier m initialised to 1 and a fixed L0 (512 in the listing, where models train on
2048 tokens; here --fire-threshold, 16 by default, our choice for SCAN's sequences of at most ~50 tokens); eps =
1e-6. Dividing by psi(max(L, i)), the farthest distance a query at i sees, maps every context length to [0, 1]
("progressive interpolation"); L keeps short contexts from being stretched. One FIRE module per attention layer
(nothing shared across layers).

That is the causal form (decoder self-attention, j <= i), the one the paper defines and trains. The bidirectional
encoder uses a symmetric form (our choice; the paper has no encoder): |i - j| normalised by psi(max(L, n - 1)), n
the example's number of real tokens, the farthest distance any query of that example can see (the paper's listing
run unmasked would normalise by the query's own position i instead, giving the first tokens of a sentence a
different scale than its last ones); positions count from the first real token (`positions_from_padding`), so left
padding changes nothing. Under randomized positions (`--random-positions`) they are the sample's, read by column as
every encoding reads them (positions/randomized.py), and n - 1 is the last column's sampled position.
"""
import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.positions.base import AttentionPosition
from fairseq_compgen.modules.positions.registry import DECODER_SELF, ENCODER_SELF, Option, register_position

HIDDEN = Option("fire_hidden", "hidden", int, 32, "hidden width of FIRE's MLP", metavar="N")
THRESHOLD = Option("fire_threshold", "threshold", float, 16.0, "FIRE's threshold L0: L = |m| L0 with m learned from "
                   "1 (the paper's listing: 512 for 2048-token training)", metavar="L")
C_INIT, EPS = 0.1, 1e-6  # the paper's listing: c starts at 0.1; eps added to the normaliser


@register_position("fire", sites=(ENCODER_SELF, DECODER_SELF), paper="FIRE: Li et al. 2024 §3",
                   help="an MLP per head of the log distance normalised by the query's context, "
                        "psi(i-j)/psi(max(L, i)) (encoder: psi(|i-j|)/psi(max(L, n-1)), n its row's length)",
                   options=(HIDDEN, THRESHOLD))
class FIRE(AttentionPosition):
    positions_from_padding = True  # the encoder's normaliser needs each example's own positions

    def __init__(self, embed_dim: int, num_heads: int, causal: bool, hidden: int = 32, threshold: float = 16.0):
        super().__init__()
        if hidden < 1 or not 0 < threshold < math.inf:  # nan and inf too: psi(max(L, i)) would be nan or inf
            raise UsageError(f"fire needs --fire-hidden >= 1 and a finite --fire-threshold > 0, got {hidden}, {threshold}")
        self.causal = causal
        self.mlp_in, self.mlp_out = nn.Linear(1, hidden), nn.Linear(hidden, num_heads)
        self.log_c = nn.Parameter(torch.tensor(C_INIT).log())  # c = 0.1
        self.threshold_scale = nn.Parameter(torch.ones(()))  # m: L = |m| L0
        self.register_buffer("threshold_base", torch.tensor(float(threshold)))  # L0 (fixed)

    def psi(self, x: Tensor) -> Tensor:
        return torch.log(self.log_c.exp() * x + 1)

    def threshold(self) -> Tensor:
        """L = |m| L0 (a scalar)."""
        return (self.threshold_scale * self.threshold_base).abs()

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Tensor:
        """q_pos [Tq] and k_pos [Tk], or per example [B, Tq] and [B, Tk] -> [H, Tq, Tk] or [B, H, Tq, Tk]."""
        qp, kp = q_pos.to(q.dtype).unsqueeze(-1), k_pos.to(q.dtype).unsqueeze(-2)  # [.., Tq, 1], [.., 1, Tk]
        if self.causal:
            dist = (qp - kp).clamp(min=0)  # [.., Tq, Tk]: i - j (j > i is masked)
            context = qp  # [.., Tq, 1]: i
        else:
            dist = (qp - kp).abs()  # [.., Tq, Tk]
            context = k_pos.to(q.dtype).amax(-1, keepdim=True).unsqueeze(-1)  # [.., 1, 1]: n - 1
        x = self.psi(dist) / (self.psi(torch.maximum(self.threshold().to(q.dtype), context)) + EPS)  # [.., Tq, Tk]
        b = self.mlp_out(F.relu(self.mlp_in(x.unsqueeze(-1))))  # [.., Tq, Tk, H]
        return b.movedim(-1, -3)  # [.., H, Tq, Tk]
