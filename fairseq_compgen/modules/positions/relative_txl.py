"""Relative positional self-attention in Transformer-XL form, as used by Csordás et al. (2021).

Csordás, Irie, Schmidhuber (2021), §3.1 and App. C; Dai et al. (2019). Per head h:

    logit_ij = [ (q_i + u_h) . k_j  +  (q_i + v_h) . (W_{k,P} P_{j-i})_h ] / sqrt(d_head)

P is the sinusoid of Eq. 1 evaluated at the signed distance j - i (negative and positive in the
encoder, the "symmetric variant"; only j <= i survives the decoder's causal mask). u, v: [H, d_head],
initialised to 0; W_{k,P}: d_model -> d_model, Xavier-uniform, no bias. Cross-attention gets no scorer.

Instead of Transformer-XL's pad-and-shift trick we project each *distinct* distance once and gather:
the [B, H, Tq, n_distances] score table is at most twice the size of the logits and the code reads as
the formula. In the decoder (causal) only distances j - i <= 0 are attended, so the table stops at 0: it is
about half as large (a profile of a rel-uni SCAN training step put the decoder's table, its projection,
scaling, gather and their backward, at ~10 % of CPU time). The masked entries j > i gather the score of
distance 0 instead, a finite value that the causal mask then replaces by -inf; their gradient is 0 either way.
The scores that are used are the same dot products as before, but the matrix product's kernel (MKL picks it by
size) may sum them in another order when n changes, so the decoder's logits can differ from the full table's
in the last bits (float32: ~1e-6 relative; float64: ~1e-15, tests/test_models.py).
"""
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_compgen.modules.positions.base import AttentionPosition, relative_distances
from fairseq_compgen.modules.positions.registry import DECODER_SELF, ENCODER_SELF, register_position
from fairseq_compgen.modules.positions.sinusoidal import sinusoid


@register_position("txl", sites=(ENCODER_SELF, DECODER_SELF), paper="Csordás et al. 2021 §3.1; Dai et al. 2019",
                   help="Transformer-XL relative attention (symmetric in the encoder, causal in the decoder)")
class TransformerXLScorer(AttentionPosition):
    def __init__(self, embed_dim: int, num_heads: int, causal: bool):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.pos_proj = nn.Linear(embed_dim, embed_dim, bias=False)  # W_{k,P}
        nn.init.xavier_uniform_(self.pos_proj.weight)
        self.u = nn.Parameter(torch.zeros(num_heads, self.head_dim))  # global content bias
        self.v = nn.Parameter(torch.zeros(num_heads, self.head_dim))  # global position bias
        self.causal = causal  # decoder self-attention: the attention masks every key after its query (j > i)

    def content_query(self, q: Tensor) -> Tensor:
        return q + self.u[None, :, None, :]  # [B, H, Tq, dh]

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Tensor:
        rel = relative_distances(q_pos, k_pos)  # [Tq, Tk]
        lo, hi = int(rel.min()), int(rel.max())
        if self.causal:  # distances j - i > 0 are masked: no score needed (see the module docstring)
            hi = min(hi, 0)
        dists = torch.arange(lo, hi + 1, device=q.device)  # [n], n = hi - lo + 1
        r = self.pos_proj(sinusoid(dists, self.embed_dim).to(q.dtype))  # [n, C]
        r = r.view(-1, self.num_heads, self.head_dim)  # [n, H, dh]
        table = torch.einsum("bhqd,nhd->bhqn", q + self.v[None, :, None, :], r) * scale  # [B, H, Tq, n]
        idx = (rel - lo).clamp(max=hi - lo).expand(q.size(0), q.size(1), -1, -1)  # [B, H, Tq, Tk], in [0, n)
        return table.gather(-1, idx)  # [B, H, Tq, Tk]
