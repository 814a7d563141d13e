"""What a position encoding may do inside attention: the interface the attention core calls, every hook optional.

For queries at absolute positions `q_pos` [Tq] and keys at `k_pos` [Tk] (or [B, Tk], per example, in
cross-attention over left-padded sources), `MultiheadAttention` computes

    q, k     = enc.rotate(q, k, q_pos, k_pos)            # q/k transforms (RoPE, xPos); identity by default
    logits   = scale * enc.content_query(q) . k  +  enc.bias(q, q_pos, k_pos, scale, k=k)
    probs    = softmax_j(logits + mask)

* `content_query(q)`: the query used for content addressing (Transformer-XL adds its global bias u);
* `bias(...)`: additive logits broadcastable to [B, H, Tq, Tk] (already scaled), or None; it sees the keys, so
  encodings whose positions depend on content (CoPE) are biases too;
* `rotate(q, k, q_pos, k_pos)`: transformed queries and keys [B, H, T, d_head], each by its own position alone.

During incremental decoding q_pos holds the current step(s) and k every key so far, so each hook works step by step;
`rotate` alone sees only the new steps' keys in self-attention (k_pos their positions): the decoding cache keeps keys
as rotated when they were new, so no step rotates the earlier keys again.
Absolute positions (added to the embeddings) are not attention encodings: see `modules/embedding.py`.
"""
from typing import Optional, Tuple

import torch.nn as nn
from torch import Tensor


class AttentionPosition(nn.Module):
    """Base class: no change to queries and keys, no bias."""

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tuple[Tensor, Tensor]:
        return q, k

    def content_query(self, q: Tensor) -> Tensor:
        return q

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Optional[Tensor]:
        return None

    def check_max_positions(self, n: int) -> None:
        """Refuse (UsageError naming the flag) options that cannot work for positions 0..n (the model's longest
        sequence, or the range of randomized positions); by default every option can."""


def relative_distances(q_pos: Tensor, k_pos: Tensor) -> Tensor:
    """Signed distance key minus query, j - i: [Tq, Tk] (the convention of Csordás et al.'s code; their App. C writes i - j, equivalent up to the learned W_{k,P})."""
    return k_pos[None, :] - q_pos[:, None]
