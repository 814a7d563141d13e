"""Convolution as self-attention: Chaabouni, Dessì, Kharitonov (2021), §3 ("Convolution as self-attention").

What the paper says: "In the limit case, we can entirely replace self-attention with convolutions. This
modification introduces one hyperparameter (kernel size). However, convolutional layers have fewer parameters
than the self-attention mechanism [...] as self-attention generalizes convolutions (Cordonnier et al., 2020)".
Its grid (App. A.1) gives the kernel through the span s in {2, 4, 6}, and §3 equates span s with "1D
convolution with kernel size 2s+1".

What we build (`--self-attn-type conv`, kernel from `--rel-span`): the self-attention sublayer is replaced by a
*lightweight convolution* (Wu et al. 2019, the convolution fairseq ships, and fairseq is the paper's code base):
one kernel per head over the relative offsets d = j - i in the window, softmax-normalised over its taps and
shared by the channels of the head, between the value and output projections of the attention it replaces:

    out_i = W_o concat_h  sum_{d=-s}^{hi}  softmax(w_h)[d] * (W_v x_{i+d})_h          (x_{i+d} = 0 outside
                                                                                       the sentence, at pads)

    encoder: hi = s, kernel size 2s+1 (centred)       decoder: hi = 0, kernel size s+1 (causal)

Why this reading: (1) it *replaces* self-attention: the weights depend on the offset only, never on content,
so it is not fixed-span attention with a learned bias (that would still be content-based attention, and is
what `fixed_span` + `t5` already cover); (2) it has fewer parameters than self-attention, as the paper says:
2 d^2 (+ biases) + H x kernel versus 4 d^2 (a full nn.Conv1d would have kernel x d^2 >= 5 d^2, more, for every
span of the grid); (3) it is a self-attention whose logits are a learned function of the relative offset
alone (Cordonnier et al.'s sense of "self-attention generalizes convolutions"); (4) its receptive field is the
fixed span's, |i - j| <= s, in both encoder and decoder. ConvS2S's GLU is not added: the gate of this variant
is SAG (`--*-sag-init`), as in every hybrid of the paper. Unlike attention, the taps are not renormalised at
the sentence borders: missing positions are zeros, as in a zero-padded convolution, so outputs do not depend
on how much padding a sentence has. `--attention-dropout` drops kernel weights (fairseq's weight dropout).
The kernel logits are Xavier-uniform initialised.

Shapes: x [B, T, C]; kernel matrix [H, Tq, Tk] (one per batch, Toeplitz and banded); values [B, H, Tk, d_head].
Incremental decoding caches the values per depth, like MultiheadAttention.
"""
from typing import Optional

import torch
import torch.nn as nn
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.attention import IncrementalState, MultiheadAttention
from fairseq_compgen.modules.dropout import dropout
from fairseq_compgen.modules.positions.span import check_span, relative_window


class ConvSelfAttention(FairseqIncrementalState, nn.Module):
    """Drop-in replacement for a self-attention `MultiheadAttention` (same forward signature)."""

    def __init__(self, embed_dim: int, num_heads: int, span: int, causal: bool, dropout: float = 0.0,
                 bias: bool = False):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise UsageError(f"embedding dim {embed_dim} is not divisible by {num_heads} heads")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.span, self.causal, self.dropout = check_span(span), causal, dropout
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        for lin in (self.v_proj, self.out_proj):
            nn.init.xavier_uniform_(lin.weight)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)
        kernel_size = self.span + 1 if causal else 2 * self.span + 1
        self.kernel = nn.Parameter(torch.empty(num_heads, kernel_size))  # logits w_h[d + s], d = -s..hi
        nn.init.xavier_uniform_(self.kernel)

    # the cache layout and beam reordering are MultiheadAttention's
    _heads = MultiheadAttention._heads
    _cache_key = MultiheadAttention._cache_key
    reorder_incremental_state = MultiheadAttention.reorder_incremental_state

    def kernel_matrix(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """M[h, i, j] = softmax(w_h)[j - i] inside the window, 0 outside: [H, Tq, Tk]."""
        index, inside = relative_window(q_pos, k_pos, self.span, self.causal)  # [Tq, Tk]
        taps = torch.softmax(self.kernel, dim=-1)  # [H, K]
        return taps[:, index] * inside  # [H, Tq, Tk]

    def forward(
        self,
        query: Tensor,
        key_value: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        causal: bool = False,
        incremental_state: Optional[IncrementalState] = None,
        depth: int = 0,
    ) -> Tensor:
        """query [B, Tq, C] (only the new steps when decoding incrementally); key_padding_mask [B, Tq] -> [B, Tq, C]"""
        if key_value is not None:
            raise UsageError("convolution as self-attention replaces self-attention only, not cross-attention")
        if causal != self.causal:
            raise UsageError(f"this convolution was built with causal={self.causal}, called with causal={causal}")
        B, Tq, _ = query.shape
        v = self._heads(self.v_proj(query))  # [B, H, Tq, dh]
        if key_padding_mask is not None:
            v = v.masked_fill(key_padding_mask.view(B, 1, Tq, 1), 0.0)  # pads contribute nothing
        start = 0
        if incremental_state is not None:
            cache = self.get_incremental_state(incremental_state, self._cache_key(depth))
            if cache is not None:
                start = cache["v"].size(2)
                v = torch.cat([cache["v"], v], dim=2)  # [B, H, Tk, dh]
            self.set_incremental_state(incremental_state, self._cache_key(depth), {"v": v})
        q_pos = torch.arange(start, start + Tq, device=query.device)  # [Tq]
        k_pos = torch.arange(v.size(2), device=query.device)  # [Tk]
        weights = self.kernel_matrix(q_pos, k_pos).to(v.dtype)  # [H, Tq, Tk]
        if self.training and self.dropout > 0:  # one dropout mask per example
            weights = dropout(weights.expand(B, -1, -1, -1), self.dropout, True)  # [B, H, Tq, Tk]
        out = torch.matmul(weights, v)  # [B, H, Tq, dh]
        return self.out_proj(out.transpose(1, 2).reshape(B, Tq, self.embed_dim))
