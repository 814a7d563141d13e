"""The copy decoder of Ontañón et al. (2022), §4.2 and Figure 2.

For a decoder output y_t [d], the last encoder layer's outputs H [S, d] and the source token ids x_1..x_S:

    p1  = softmax(W_o y_t + b_o)                      the ordinary output distribution over the vocabulary
    q_t = W_c y_t + b_c                               W_c: d x d
    a_t = softmax_j(q_t . H_j / sqrt(d))              single-head attention, no key projection
    p2  = sum_j a_tj onehot(x_j)                      a distribution over the vocabulary
    w_t = sigmoid(w_g . y_t + b_g)                    the copy gate
    p   = (1 - w_t) p1 + w_t p2

Unlike the authors' code, source padding is masked in a_t, so pads get no copy mass; so is the start token that
`--encoder-bos` inserts (modules/encoder_bos.py), which is no source word (the decoder passes both as the mask).
Needs one vocabulary for source and target (a joined dictionary). The result is returned as log-probabilities,
computed in log space: log p = logaddexp(log(1 - w) + log_softmax(logits), log(w) + log(p2)), with log(p2) = -inf
exactly where no source token has that id. Because they are normalized, any later (log_)softmax of them is
the identity, so criterions that re-normalize the decoder output still get p.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_compgen.modules.softmax import softmax


class CopyDistribution(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.query = nn.Linear(dim, dim)  # W_c, b_c
        self.gate = nn.Linear(dim, 1)  # w_g, b_g
        for lin in (self.query, self.gate):  # Keras Dense defaults: Glorot-uniform, zero bias
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)
        self.scale = 1.0 / math.sqrt(dim)

    def attention(self, features: Tensor, encoder_out: Tensor, no_copy: Tensor) -> Tensor:
        """features [B, T, d], encoder_out [B, S, d], no_copy [B, S] (True: padding, <s>) -> a [B, T, S] (0 there)."""
        scores = torch.einsum("btd,bsd->bts", self.query(features), encoder_out) * self.scale
        scores = scores.masked_fill(no_copy[:, None, :], float("-inf"))
        return softmax(scores)  # over source positions (modules/softmax.py)

    def forward(self, features: Tensor, logits: Tensor, encoder_out: Tensor, no_copy: Tensor,
                src_tokens: Tensor) -> Tensor:
        """features [B, T, d]; logits [B, T, V] (W_o y + b_o); encoder_out [B, S, d]; no_copy,
        src_tokens [B, S] -> log p [B, T, V]."""
        a = self.attention(features, encoder_out, no_copy)  # [B, T, S]
        p2 = a.new_zeros(logits.shape).scatter_add_(-1, src_tokens[:, None, :].expand(-1, a.size(1), -1), a)  # [B, T, V]
        present = p2 > 0
        log_p2 = torch.where(present, p2, torch.ones_like(p2)).log().masked_fill(~present, float("-inf"))
        g = self.gate(features)  # [B, T, 1]; w = sigmoid(g)
        return torch.logaddexp(F.logsigmoid(-g) + F.log_softmax(logits.float(), -1).to(logits.dtype),
                               F.logsigmoid(g) + log_p2)
