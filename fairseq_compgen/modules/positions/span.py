"""Span-limited and span-clipped position biases of Chaabouni, Dessì, Kharitonov (2021), §3, Eq. 3.

"Can Transformers Jump Around Right in Natural Language? Assessing Performance Transfer from SCAN".
Both variants add a bias b_ij to the self-attention logits (Eq. 3):

    alpha_ij = q_i . k_j / sqrt(d_head) + b_ij

* ``t5`` ("T5 attention"): b_ij = B[h, clip(j - i, -s, s) + s], a learned table B of shape [heads, 2s+1] per
  attention module, i.e. (2s+1) x heads x layers parameters (a Universal model shares its one layer, and with
  it the table, across depths). Distances beyond s share the border value b_{+-s}. Initialised to 0, where
  the model reduces to the vanilla Transformer (the paper's footnote 10). The paper writes the difference as
  i - j but shows the decoder's usable distances as d <= 0 (Fig. 1), i.e. d = key - query; we index by
  d = j - i (`relative_distances`), so in the decoder only the entries d <= 0 are ever used.
* ``fixed_span`` ("Fixed-span self-attention"): b_ij = -inf where |i - j| > s, 0 elsewhere; no parameters.
  Same receptive field as a 1D convolution with kernel size 2s+1.

The span s is `--rel-span`. Both scorers return one bias per batch, not per example: [H, Tq, Tk] (t5) and
[Tq, Tk] (fixed_span); queries at absolute positions q_pos (the current step during incremental decoding).
Left padding shifts queries and keys alike, so j - i, and with it the bias, is the same for any padding.

"-inf" is the most negative finite value of the dtype, halved (so adding logits cannot overflow): exp of it
underflows to exactly 0 next to any allowed key, and a query none of whose in-span keys is a real token (a
pad position deep in a left-padded source) still gets a finite softmax instead of NaN.
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.positions.base import AttentionPosition, relative_distances
from fairseq_compgen.modules.positions.registry import DECODER_SELF, ENCODER_SELF, Option, register_position

SPAN = Option("rel_span", "span", int, 4, "span s of t5 / fixed_span and of --self-attn-type conv (kernel 2s+1 in "
              "the encoder, causal kernel s+1 in the decoder); an integer >= 1 (Chaabouni et al. 2021: 2, 4 or 6)",
              metavar="S")
CHAABOUNI = "Chaabouni et al. 2021 §3, Eq. 3"


def check_span(span) -> int:
    """`--rel-span` must be a positive integer."""
    if isinstance(span, bool) or not isinstance(span, int) or span < 1:
        raise UsageError(f"--rel-span must be an integer >= 1, got {span!r}")
    return span


def relative_window(q_pos: Tensor, k_pos: Tensor, span: int, causal: bool = False) -> Tuple[Tensor, Tensor]:
    """Clipped distance index and window membership, for queries q_pos [Tq] and keys k_pos [Tk].

    With d = j - i and hi = 0 if causal else s:
        index [Tq, Tk] long  = clip(d, -s, hi) + s      (in [0, s + hi]: the table column of distance d)
        inside [Tq, Tk] bool = -s <= d <= hi
    """
    d = relative_distances(q_pos, k_pos)  # [Tq, Tk]
    hi = 0 if causal else span
    return d.clamp(-span, hi) + span, (d >= -span) & (d <= hi)


def blocked_logit(dtype: torch.dtype) -> float:
    """A finite stand-in for -inf in attention logits of `dtype` (see the module docstring)."""
    return torch.finfo(dtype).min / 2


@register_position("t5", sites=(ENCODER_SELF, DECODER_SELF), paper=CHAABOUNI, options=(SPAN,),
                   help="a learned bias per head and layer on the logits, indexed by the key-minus-query distance "
                        "clipped to [-s, s], s = --rel-span")
class T5RelativeBias(AttentionPosition):
    """b_ij = relative_bias[h, clip(j - i, -s, s) + s]; parameters: relative_bias [H, 2s+1]."""

    def __init__(self, embed_dim: int, num_heads: int, causal: bool, span: int = 4):
        super().__init__()
        self.span = check_span(span)
        self.relative_bias = nn.Parameter(torch.zeros(num_heads, 2 * self.span + 1))  # [H, 2s+1]

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Tensor:
        index, _ = relative_window(q_pos, k_pos, self.span)  # [Tq, Tk]
        return self.relative_bias[:, index].to(q.dtype)  # [H, Tq, Tk], not scaled (Eq. 3)


@register_position("fixed_span", sites=(ENCODER_SELF, DECODER_SELF), paper=CHAABOUNI, options=(SPAN,),
                   help="no attention beyond distance s = --rel-span")
class FixedSpanMask(AttentionPosition):
    """b_ij = -inf if |i - j| > s else 0; no parameters."""

    def __init__(self, embed_dim: int, num_heads: int, causal: bool, span: int = 4):
        super().__init__()
        self.span = check_span(span)

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Tensor:
        _, inside = relative_window(q_pos, k_pos, self.span)  # [Tq, Tk]
        zeros = torch.zeros(inside.shape, dtype=q.dtype, device=q.device)
        return zeros.masked_fill(~inside, blocked_logit(q.dtype))  # [Tq, Tk]
