"""FIRE: Li, You, Guruganesh, Ainslie, Ontañón, Zaheer, Sanghai, Yang, Kumar, Bhojanapalli (2024), "Functional
Interpolation for Relative Positions Improves Long Context Transformers" (ICLR), §3.

A learned function of the progressively interpolated log distance, one output per head, added to the logits:

    b_h(i, j) = f_theta( psi(i - j) / psi(max(L, i)) )_h,     psi(x) = log(c x + 1)

f_theta: R -> R^H is an MLP (Linear(1, hidden), ReLU, Linear(hidden, H); hidden = --fire-hidden, 32), and c and the
threshold L are learned scalars (c > 0 kept as exp(log c), initialised to 1; L initialised to --fire-threshold).
Dividing by psi(max(L, i)), the distance a query at i can see at most, maps every context length to [0, 1]
("progressive interpolation"); L keeps short contexts from being stretched.

That is the causal form (decoder self-attention, j <= i). In the bidirectional encoder we use the symmetric form
(our choice; the paper defines the causal one): |i - j| normalised by psi(max(L, n - 1)), n the example's number of
real tokens, the farthest distance any query of that example can see; positions count from the first real token
(`positions_from_padding`), so left padding changes nothing.
"""
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.positions.base import AttentionPosition
from fairseq_compgen.modules.positions.registry import DECODER_SELF, ENCODER_SELF, Option, register_position

HIDDEN = Option("fire_hidden", "hidden", int, 32, "hidden width of FIRE's MLP", metavar="N")
THRESHOLD = Option("fire_threshold", "threshold", float, 16.0, "initial value of FIRE's learned threshold L",
                   metavar="L")


@register_position("fire", sites=(ENCODER_SELF, DECODER_SELF), paper="FIRE: Li et al. 2024 §3",
                   help="an MLP per head of the log distance normalised by the query's context, "
                        "psi(i-j)/psi(max(L, i)) (symmetric in the encoder)", options=(HIDDEN, THRESHOLD))
class FIRE(AttentionPosition):
    positions_from_padding = True  # the encoder's normaliser needs each example's own positions

    def __init__(self, embed_dim: int, num_heads: int, causal: bool, hidden: int = 32, threshold: float = 16.0):
        super().__init__()
        if hidden < 1 or threshold <= 0:
            raise UsageError(f"fire needs --fire-hidden >= 1 and --fire-threshold > 0, got {hidden}, {threshold}")
        self.causal = causal
        self.mlp_in, self.mlp_out = nn.Linear(1, hidden), nn.Linear(hidden, num_heads)
        self.log_c = nn.Parameter(torch.zeros(()))  # c = 1
        self.threshold = nn.Parameter(torch.tensor(float(threshold)))  # L

    def psi(self, x: Tensor) -> Tensor:
        return torch.log(self.log_c.exp() * x + 1)

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Tensor:
        """q_pos [Tq] and k_pos [Tk], or per example [B, Tq] and [B, Tk] -> [H, Tq, Tk] or [B, H, Tq, Tk]."""
        qp, kp = q_pos.to(q.dtype).unsqueeze(-1), k_pos.to(q.dtype).unsqueeze(-2)  # [.., Tq, 1], [.., 1, Tk]
        if self.causal:
            dist = (qp - kp).clamp(min=0)  # [.., Tq, Tk]: i - j (j > i is masked)
            context = qp  # [.., Tq, 1]: i
        else:
            dist = (qp - kp).abs()  # [.., Tq, Tk]
            context = k_pos.to(q.dtype).amax(-1, keepdim=True).unsqueeze(-1)  # [.., 1, 1]: n - 1
        x = self.psi(dist) / self.psi(torch.maximum(self.threshold.to(q.dtype), context))  # [.., Tq, Tk]
        b = self.mlp_out(F.relu(self.mlp_in(x.unsqueeze(-1))))  # [.., Tq, Tk, H]
        return b.movedim(-1, -3)  # [.., H, Tq, Tk]
