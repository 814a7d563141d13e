"""Self-attention gate (SAG): Chaabouni, Dessì, Kharitonov (2021), §3 and Algorithm 1.

The output of self-attention is scaled by sigma(beta), one learned scalar beta per layer, before dropout and
the residual (an imitation of ConvS2S's GLU gate):

    res <- x;  x <- self_attn(x);  x <- x * sigma(beta);  x <- layer_norm(res + dropout(x))      (Algorithm 1)

(with `--normalize-before` the LayerNorm moves to the sublayer input, the gate stays on the self-attention
output). beta is initialised to beta_0, a hyperparameter set separately for the encoder and the decoder
(`--encoder-sag-init`, `--decoder-sag-init`; absent = no gate). With `--universal` the one shared layer has
one beta, used at every depth.
"""
import math
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_compgen.errors import UsageError


class SelfAttentionGate(nn.Module):
    """y [..., C] -> sigma(beta) * y; one parameter `beta` (a 0-d tensor)."""

    def __init__(self, beta0: float):
        super().__init__()
        beta0 = float(beta0)
        if not math.isfinite(beta0):
            raise UsageError(f"the self-attention gate needs a finite beta_0, got {beta0}")
        self.beta = nn.Parameter(torch.tensor(beta0))

    def forward(self, y: Tensor) -> Tensor:
        return y * torch.sigmoid(self.beta).to(y.dtype)


def build_gate(beta0: Optional[float]) -> Optional[SelfAttentionGate]:
    """None (no --*-sag-init) -> no gate."""
    return None if beta0 is None else SelfAttentionGate(beta0)


def gated(gate: Optional[nn.Module], y: Tensor) -> Tensor:
    """Apply an optional gate to a self-attention output y [B, T, C]."""
    return y if gate is None else gate(y)
