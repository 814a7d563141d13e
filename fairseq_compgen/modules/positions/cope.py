"""CoPE, contextual position encoding: Golovneva, Wang, Weston, Sukhbaatar (2024), "Contextual Position Encoding:
Learning to Count What's Important", §3 and the PyTorch listing of the paper (classes CoPE and SelfAttn).

Positions are counted by gates that depend on content, so a position can mean "the k-th word" or "the k-th
sentence" instead of "the k-th token". For a query i and key j <= i (the paper writes the formulas without the
1/sqrt(d) scaling; where it goes is the listing's):

    g_it = sigmoid(q_i . k_t / sqrt(d_head))        (gate: does key t count? the listing gates the scaled,
                                                      masked logits, so a key after the query counts 0)
    p_ij = sum_{t=j}^{i} g_it                       (a fractional position, >= 0; clipped at P - 1)
    e[p] = (p - floor p) e[ceil p] + (1 - p + floor p) e[floor p]      (interpolated learned embeddings)
    logit_ij = q_i . k_j / sqrt(d_head)  +  q_i . e[p_ij]                (the position term is not scaled)

The authors' released code (facebookresearch/RAM, projects/cope, `ContextPosSelfAttn`) differs by default: it adds
q_i . e[p_ij] before dividing by sqrt(d_head), so its position term is scaled too (its --cope-nodiv gives the
listing's form, which we follow), and it keeps block size + 1 positions unless --cope-npos is given.

e: [P, d_head], P = --cope-max-positions (the paper's p_max, npos_max in the listing; 64 here, our choice), one
table per attention layer shared by its heads (the listing's module works on one head's q and k, heads folded
into the batch), initialised to zeros as in the listing. Gates and positions are per head (each head has its own
q and k). As the paper does, q_i . e[p] is computed for the P integer positions and interpolated, never e[p]
itself. Causal only (decoder self-attention), as in the paper: the sum from j to i is over the keys a causal query
sees. Step by step, a new query's positions are computed over every cached key, which equals the full pass.
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.positions.base import AttentionPosition
from fairseq_compgen.modules.positions.registry import DECODER_SELF, Option, register_position

MAX_POSITIONS = Option("cope_max_positions", "max_positions", int, 64,
                       "how many integer positions CoPE has embeddings for (fractional positions are clipped to "
                       "this minus 1)", metavar="P")


@register_position("cope", sites=(DECODER_SELF,), paper="CoPE: Golovneva et al. 2024 §3",
                   help="contextual positions: gates sigmoid(q.k/sqrt(d)) summed from key to query, interpolated learned "
                        "position embeddings (causal attention only)", options=(MAX_POSITIONS,))
class ContextualPositions(AttentionPosition):
    def __init__(self, embed_dim: int, num_heads: int, causal: bool, max_positions: int = 64):
        super().__init__()
        if not causal:
            raise UsageError("cope is for causal (decoder) self-attention only")
        if max_positions < 2:
            raise UsageError(f"--cope-max-positions must be >= 2, got {max_positions}")
        self.embedding = nn.Parameter(torch.zeros(max_positions, embed_dim // num_heads))  # e: [P, dh]

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Tensor:
        """q [B, H, Tq, dh], k [B, H, Tk, dh] (every key so far) -> q_i . e[p_ij] (unscaled): [B, H, Tq, Tk]."""
        after = k_pos[None, :] > q_pos[:, None]  # [Tq, Tk]: keys after the query do not count
        skip = torch.zeros(after.shape, dtype=q.dtype, device=q.device).masked_fill_(after, float("-inf"))
        return _CoPEBias.apply(q, k, self.embedding.to(q.dtype), skip, scale)


class _CoPEBias(torch.autograd.Function):
    """The CoPE term q_i . e[p_ij], [B, H, Tq, Tk], with its gradient written out.

    Forward: the formulas of the module docstring with the operations autograd would run on the plain expression,
    element by element in the same layout, so values are bitwise the same, but fewer [B, H, Tq, Tk] tensors: a
    key after the query gets the gate logit -inf (sigmoid 0, as zeroing its gate), the elementwise steps run in
    place where the input is not needed again, and q . e[n] is computed only for n <= Tk (p_ij <= Tk: at most Tk
    gates, each <= 1). Backward, without the zero tensors autograd builds for floor, clamp, both gathers and
    masked_fill; with G = dL/d(out), z = q . e, w = p - floor p:
        dz[n]   = sum over pairs with floor p = n of (1 - w) G  +  with ceil p = n of w G
        dp      = G (z[ceil p] - z[floor p])                 (floor has no gradient; a clipped p is an integer)
        dg_t    = sum_{j <= t} dp_j                          (p_j = sum_{t >= j} g_t)
        da      = dg g (1 - g) scale                         (a = q . k; 0 for masked keys, whose g is 0)
        dq = da k + dz e,   dk = da^T q,   de = dz^T q
    """

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, e: Tensor, skip: Tensor, scale: float) -> Tensor:
        P, Tk = e.size(0), k.size(2)
        q = q.contiguous()  # [B, H, Tq, dh], copied once here rather than by each product below
        g = torch.matmul(q, k.transpose(-1, -2))  # [B, H, Tq, Tk]: q_i . k_t
        g.mul_(scale).add_(skip).sigmoid_()  # g_it = sigmoid(q_i . k_t / sqrt(d_h)), 0 for keys after the query
        p = g.flip(-1).cumsum(-1).flip(-1)  # [B, H, Tq, Tk]: p_ij = sum_{t=j}^{i} g_it
        if Tk >= P:  # p can exceed the last embedding (p <= Tk)
            p = p.clamp(max=P - 1)
        n = min(P, Tk + 1)  # the positions p can reach: 0..n-1
        z = torch.matmul(q, e[:n].t())  # [B, H, Tq, n]: q_i . e[n]
        lo = p.floor()
        hi = p.ceil().long()  # [B, H, Tq, Tk]
        w = p.sub_(lo)  # [B, H, Tq, Tk]: weight of e[ceil p]
        lo = lo.long()
        z_lo, z_hi = z.gather(-1, lo), z.gather(-1, hi)  # [B, H, Tq, Tk]
        w_lo = 1 - w  # [B, H, Tq, Tk]: weight of e[floor p]
        z_diff = z_hi - z_lo  # [B, H, Tq, Tk], for the gradient
        out = z_hi.mul_(w).add_(z_lo.mul_(w_lo))  # w e[ceil p] + (1 - w) e[floor p], dotted with q_i
        ctx.scale, ctx.n = scale, n
        ctx.save_for_backward(q, k, e, g, w, w_lo, lo, hi, z_diff)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
        q, k, e, g, w, w_lo, lo, hi, z_diff = ctx.saved_tensors
        B, H, Tq, dh = q.shape
        dz = torch.zeros(B, H, Tq, ctx.n, dtype=grad.dtype, device=grad.device)  # [B, H, Tq, n]
        buf = grad * w_lo  # [B, H, Tq, Tk], reused below
        dz.scatter_add_(-1, lo, buf).scatter_add_(-1, hi, torch.mul(grad, w, out=buf))
        dp = torch.mul(grad, z_diff, out=buf)  # [B, H, Tq, Tk] (0 where p was clipped: floor p = ceil p there)
        da = torch.ops.aten.sigmoid_backward(dp.cumsum_(-1), g).mul_(ctx.scale)  # [B, H, Tq, Tk]: d(q_i . k_t)
        dq = torch.matmul(da, k) + torch.matmul(dz, e[:ctx.n])  # [B, H, Tq, dh]
        dk = torch.matmul(da.transpose(-1, -2), q)  # [B, H, Tk, dh]
        de = torch.zeros_like(e)  # [P, dh]
        de[:ctx.n] = dz.reshape(-1, ctx.n).t() @ q.reshape(-1, dh)
        return dq, dk, de, None, None
