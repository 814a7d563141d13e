"""Encoder and decoder layers (Vaswani et al. 2017), post-LN by default as in Csordás et al.'s code.

    post-LN:  x = LN(x + Drop(F(x)))          pre-LN (--normalize-before):  x = x + Drop(F(LN(x)))

Encoder: self-attention, feed-forward. Decoder: causal self-attention, cross-attention, feed-forward.
Feed-forward: W2 Drop(ReLU(W1 x + b1)) + b2, W1 Xavier-uniform with ReLU gain, W2 Xavier-uniform
(the authors' code; with it the parameter counts of their Table 5 come out). Every layer takes `depth` so a
layer applied at several depths (Universal Transformer) keeps a separate decoding cache per depth.
"""
from typing import Callable, Optional

import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_compgen.modules.attention import IncrementalState, MultiheadAttention
from fairseq_compgen.modules.depth_memo import DepthMemo
from fairseq_compgen.modules.dropout import Dropout
from fairseq_compgen.modules.self_attention_gate import gated


class FeedForward(nn.Module):
    def __init__(self, dim: int, ffn_dim: int, activation_dropout: float):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, ffn_dim), nn.Linear(ffn_dim, dim)
        nn.init.xavier_uniform_(self.fc1.weight, gain=nn.init.calculate_gain("relu"))
        nn.init.xavier_uniform_(self.fc2.weight)
        self.dropout = Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:  # [B, T, C] -> [B, T, C]
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class Sublayer(nn.Module):
    """Residual connection, dropout and LayerNorm around one sublayer, pre- or post-norm."""

    def __init__(self, dim: int, dropout: float, normalize_before: bool):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.dropout = Dropout(dropout)
        self.normalize_before = normalize_before

    def forward(self, x: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
        if self.normalize_before:
            return x + self.dropout(fn(self.norm(x)))
        return self.norm(x + self.dropout(fn(x)))


class EncoderLayer(nn.Module):
    def __init__(self, dim, ffn_dim, self_attn: MultiheadAttention, dropout, activation_dropout, normalize_before,
                 gate: Optional[nn.Module] = None):
        super().__init__()
        self.self_attn = self_attn
        self.gate = gate  # optional self-attention gate on the self-attention output (self_attention_gate.py)
        self.ffn = FeedForward(dim, ffn_dim, activation_dropout)
        self.attn_block = Sublayer(dim, dropout, normalize_before)
        self.ffn_block = Sublayer(dim, dropout, normalize_before)

    def forward(self, x: Tensor, padding_mask: Optional[Tensor], depth: int = 0,
                positions: Optional[Tensor] = None) -> Tensor:
        """x [B, S, C]; padding_mask [B, S] (True at pads); positions [S] (None: 0..S-1) -> [B, S, C]"""
        extra = {} if positions is None else {"positions": positions}
        x = self.attn_block(x, lambda h: gated(self.gate, self.self_attn(h, key_padding_mask=padding_mask, depth=depth,
                                                                         **extra)))
        return self.ffn_block(x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, dim, ffn_dim, self_attn, cross_attn, dropout, activation_dropout, normalize_before,
                 gate: Optional[nn.Module] = None):
        super().__init__()
        self.self_attn, self.cross_attn = self_attn, cross_attn
        self.gate = gate  # optional self-attention gate on the self-attention output (self_attention_gate.py)
        self.ffn = FeedForward(dim, ffn_dim, activation_dropout)
        self.self_block = Sublayer(dim, dropout, normalize_before)
        self.cross_block = Sublayer(dim, dropout, normalize_before)
        self.ffn_block = Sublayer(dim, dropout, normalize_before)

    def forward(
        self,
        x: Tensor,
        encoder_out: Tensor,
        encoder_padding_mask: Optional[Tensor],
        incremental_state: Optional[IncrementalState] = None,
        depth: int = 0,
        positions: Optional[Tensor] = None,
        memo: Optional[DepthMemo] = None,
    ) -> Tensor:
        """x [B, T, C]; encoder_out [B, S, C]; encoder_padding_mask [B, S]; positions [T] of the self-attention
        (None: 0..T-1); memo: the pass's DepthMemo of a shared layer, for the cross-attention's encoder-side
        projections -> [B, T, C]"""
        extra = {} if positions is None else {"positions": positions}
        x = self.self_block(
            x, lambda h: gated(self.gate, self.self_attn(h, causal=True, incremental_state=incremental_state,
                                                         depth=depth, **extra))
        )
        x = self.cross_block(
            x,
            lambda h: self.cross_attn(
                h, encoder_out, key_padding_mask=encoder_padding_mask,
                incremental_state=incremental_state, depth=depth, memo=memo,
            ),
        )
        return self.ffn_block(x, self.ffn)
