"""Multi-head attention with pluggable position scoring and a decoding cache per depth.

One attention module serves every variant of the project. What differs between papers is *how
positions enter the logits*; that is delegated to a position encoding `scorer` (an `AttentionPosition`, see
modules/positions/base.py), whose hooks are called here and never named:

    q, k = scorer.rotate(q, k, q_pos, k_pos)                                       (RoPE, xPos; else identity)
    logits[b, h, i, j] = scale * (scorer.content_query(q))[b,h,i] . k[b,h,j] + scorer.bias(q, i, j, k)[b,h,i,j]
    probs = softmax_j(logits + mask)           out = W_o concat_h(sum_j probs v_j)

With no scorer this is Vaswani et al.'s attention. Projections have no bias by default, as in
Csordás et al.'s code. The scale is 1/sqrt(d_head), as in their code (the paper
text, App. C, says 1/sqrt(d_model)).

Incremental decoding keeps keys/values under a key that includes the *depth* at which the module is
applied, so one layer reused at every depth (Universal Transformer) keeps one cache per depth
(fairseq's MultiheadAttention keys its cache by module instance, so a shared layer would overwrite its
own cache at every depth).
"""
from typing import Dict, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.depth_memo import DepthMemo, once_per_pass
from fairseq_compgen.modules.dropout import dropout
from fairseq_compgen.modules.softmax import softmax

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


def add_projections(module: nn.Module, embed_dim: int, kv_dim: int, bias: bool) -> None:
    """module.q_proj (embed_dim -> embed_dim), k_proj and v_proj (kv_dim -> embed_dim), out_proj (embed_dim ->
    embed_dim): Xavier-uniform weights, zero biases, made in this order (the order of the draws from the seed). For
    every attention of this package (this module's, modules/linear_attention.py's)."""
    module.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
    module.k_proj = nn.Linear(kv_dim, embed_dim, bias=bias)
    module.v_proj = nn.Linear(kv_dim, embed_dim, bias=bias)
    module.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
    for lin in (module.q_proj, module.k_proj, module.v_proj, module.out_proj):
        nn.init.xavier_uniform_(lin.weight)
        if lin.bias is not None:
            nn.init.zeros_(lin.bias)


class MultiheadAttention(FairseqIncrementalState, nn.Module):
    """Self- or cross-attention. Tensors are batch-first: x [B, T, C]."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = False,
        scorer: Optional[nn.Module] = None,
        kv_dim: Optional[int] = None,
        key_positions_from_padding: bool = False,
    ):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise UsageError(f"embedding dim {embed_dim} is not divisible by {num_heads} heads")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.scale = self.head_dim**-0.5
        add_projections(self, embed_dim, kv_dim or embed_dim, bias)
        self.dropout = dropout
        self.scorer = scorer
        # cross-attention over left-padded sources: key positions count from each example's first real token
        self.key_positions_from_padding = key_positions_from_padding

    # ---- shapes -------------------------------------------------------------------------------
    def _heads(self, x: Tensor) -> Tensor:
        """[B, T, C] -> [B, H, T, d_head]"""
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)

    # ---- cache --------------------------------------------------------------------------------
    def _cache_key(self, depth: int) -> str:
        return f"depth{depth}"

    def reorder_incremental_state(self, incremental_state: IncrementalState, new_order: Tensor):
        """Reorder the cached keys/values of every depth along the batch dimension (beam search)."""
        prefix = self._get_full_incremental_state_key("depth")
        for key in [k for k in incremental_state if k.startswith(prefix)]:
            buf = incremental_state[key]
            incremental_state[key] = {n: (t.index_select(0, new_order) if t is not None else None) for n, t in buf.items()}
        return incremental_state

    # ---- forward ------------------------------------------------------------------------------
    def forward(
        self,
        query: Tensor,
        key_value: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        causal: bool = False,
        incremental_state: Optional[IncrementalState] = None,
        depth: int = 0,
        positions: Optional[Tensor] = None,
        memo: Optional[DepthMemo] = None,
    ) -> Tensor:
        """
        query: [B, Tq, C]; key_value: [B, Tk, C] for cross-attention (None: self-attention);
        key_padding_mask: [B, Tk] bool, True at padding; causal: forbid keys after the query;
        incremental_state: decoding cache, `query` then holds only the new step(s);
        positions: [T] increasing positions of the self-attention's tokens (default 0..T-1; randomized positions);
        memo: a shared (Universal) layer's DepthMemo: cross-attention keys/values computed once per pass.
        Returns [B, Tq, C].
        """
        B, Tq, _ = query.shape
        is_self = key_value is None
        q = self._heads(self.q_proj(query))  # [B, H, Tq, dh]
        cache = self.get_incremental_state(incremental_state, self._cache_key(depth)) if incremental_state is not None else None
        start = 0  # absolute position of query[:, 0]
        if is_self:  # the new steps' keys and values; cached with the earlier ones once rotated (below)
            k, v = self._heads(self.k_proj(query)), self._heads(self.v_proj(query))  # [B, H, Tq, dh]
            if cache is not None:
                start = cache["k"].size(2)
        elif cache is not None:  # encoder keys/values are computed once per sentence
            k, v = cache["k"], cache["v"]
            if self.scorer is not None:  # decoder steps already seen = the query position (only scorers need it;
                start = int(cache["steps"][0])  # reading it from the tensor costs a device sync per step)
            self.set_incremental_state(incremental_state, self._cache_key(depth),
                                       {"k": k, "v": v, "steps": cache["steps"] + Tq})
        else:  # [B, H, Tk, dh] each; the same at every depth of a shared layer (modules/depth_memo.py)
            k, v = once_per_pass(memo, (self, "kv", key_value),
                                 lambda: (self._heads(self.k_proj(key_value)), self._heads(self.v_proj(key_value))))
            if incremental_state is not None:
                steps = torch.full((B,), Tq, dtype=torch.long, device=query.device)  # [B], reordered with k, v
                self.set_incremental_state(incremental_state, self._cache_key(depth), {"k": k, "v": v, "steps": steps})
        Tk = start + k.size(2) if is_self else k.size(2)

        q_idx = torch.arange(start, start + Tq, device=query.device)  # [Tq] indices of the queries
        k_idx = torch.arange(Tk, device=query.device)  # [Tk]
        q_pos, k_pos = q_idx, k_idx  # positions the encoding sees
        if positions is not None:  # e.g. randomized positions (positions/randomized.py): [T] increasing, by column
            q_pos, k_pos = positions[start:start + Tq], positions[:Tk]  # (as the embedding reads them)
        from_padding = self.key_positions_from_padding or getattr(self.scorer, "positions_from_padding", False)
        if from_padding and key_padding_mask is not None and positions is None:
            k_pos = (~key_padding_mask).long().cumsum(1) - 1  # [B, Tk] (pads: -1 or earlier positions, masked)
            if is_self:  # per-example query positions as well (encoders whose bias is not shift-invariant)
                q_pos = k_pos  # [B, Tq]
        bias = None  # additive logits, broadcastable to [B, H, Tq, Tk]
        q_content = q
        if self.scorer is not None:  # self-attention's k: the new steps only, at their positions k_pos[..., start:]
            # q [B, H, Tq, dh]; k [B, H, Tq, dh] (self: the new steps) or [B, H, Tk, dh] (cross)
            q, k = self.scorer.rotate(q, k, q_pos, k_pos[..., start:] if is_self else k_pos)
        if is_self:  # the cache keeps keys as rotated when they were new: no step rotates earlier keys again
            if cache is not None:
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)  # [B, H, Tk, dh]
            if incremental_state is not None:
                self.set_incremental_state(incremental_state, self._cache_key(depth), {"k": k, "v": v})
        if self.scorer is not None:
            q_content = self.scorer.content_query(q)
            bias = self.scorer.bias(q, q_pos, k_pos, self.scale, k=k)
        blocked = None  # bool, True where a query may not look, broadcastable to [B, H, Tq, Tk]
        if causal:
            blocked = (k_idx[None, :] > q_idx[:, None]).view(1, 1, Tq, Tk)
        if key_padding_mask is not None:
            pad = key_padding_mask.view(B, 1, 1, Tk)
            blocked = pad if blocked is None else (blocked | pad)
        if self.training and self.dropout > 0.0:
            # written out so that the dropout mask on the probabilities is drawn by modules/dropout.py (SDPA's
            # math path, which a float mask or dropout selects on CPU anyway, draws it with the slower bernoulli_)
            logits = torch.matmul(q_content, k.transpose(-1, -2)) * self.scale  # [B, H, Tq, Tk]
            if bias is not None:
                logits = logits + bias.to(q.dtype)
            if blocked is not None:
                logits = logits.masked_fill(blocked, float("-inf"))
            probs = dropout(softmax(logits), self.dropout, True)  # [B, H, Tq, Tk]; modules/softmax.py
            out = torch.matmul(probs, v)  # [B, H, Tq, dh]
        else:
            if bias is not None and bias.requires_grad and q.device.type == "cpu":
                # SDPA would take its math path (CPU kernels do not give a bias its gradient): the same, cheaper
                out = _biased_attention(q_content, k, v, bias.to(q.dtype), blocked, self.scale)  # [B, H, Tq, dh]
            else:
                is_causal = False
                if bias is None and causal and key_padding_mask is None and Tq == Tk:
                    attn_mask, is_causal = None, True  # lets SDPA pick a fused kernel instead of materializing the mask
                elif bias is None:
                    attn_mask = None if blocked is None else ~blocked  # SDPA: True = may attend
                else:
                    attn_mask = bias.to(q.dtype)
                    if blocked is not None:
                        attn_mask = attn_mask.masked_fill(blocked, float("-inf"))
                out = F.scaled_dot_product_attention(q_content, k, v, attn_mask=attn_mask, is_causal=is_causal,
                                                     scale=self.scale)  # [B, H, Tq, dh]
        out = out.transpose(1, 2).reshape(B, Tq, self.embed_dim)
        return self.out_proj(out)


def _biased_attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, blocked: Optional[Tensor], scale: float) -> Tensor:
    """softmax_j(scale * q.k + bias, blocked pairs excluded) v: [B, H, Tq, dh].

    The operations of SDPA's math path (which SDPA takes on CPU for a bias that needs a gradient) in the same
    order, so the result is bitwise the same (q and k each scaled by sqrt(scale), as SDPA does), but cheaper: the
    mask is added as 0 / -inf from a tensor of the mask's own (small) shape instead of filling a copy of the bias
    (x + 0 is x, x + -inf is -inf), and rows with no key allowed (SDPA's "safe softmax" gives them zero
    probabilities) are found on the small mask instead of by scanning every row of the logits.
    q [B, H, Tq, dh], k and v [B, H, Tk, dh], bias broadcastable to [B, H, Tq, Tk], blocked bool broadcastable to it.
    """
    s = scale**0.5
    logits = torch.matmul(q * s, k.transpose(-1, -2) * s)  # [B, H, Tq, Tk], a fresh tensor: updated in place
    logits.add_(bias)
    dead = None
    if blocked is not None:
        dead = blocked.all(dim=-1, keepdim=True)  # [.., Tq, 1]: queries that may see no key
        if bool(dead.any()):  # their softmax is NaN: filled (no gradient flows through blocked logits), then zeroed
            logits.masked_fill_(blocked, float("-inf"))
        else:
            logits.add_(torch.zeros(blocked.shape, dtype=logits.dtype, device=logits.device)
                        .masked_fill_(blocked, float("-inf")))  # the mask's shape, e.g. [B, 1, 1, Tk] or [1, 1, Tq, Tk]
            dead = None
    probs = torch.softmax(logits, dim=-1)  # [B, H, Tq, Tk]
    if dead is not None:
        probs = probs.masked_fill(dead, 0.0)
    return torch.matmul(probs, v)
