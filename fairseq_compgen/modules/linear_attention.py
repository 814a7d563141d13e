"""Linear attention with Q/K normalization: Park & Kim (2024), "Improving Systematic Generalization of Linear
Transformer Using Normalization Layers and Orthogonality Loss Function", Sections 2.1 and 4.1, on top of the
Linear Transformer of Katharopoulos et al. (2020).

Per head (d = d_head), with Q̂_n = Norm(φ(Q_n)), K̂_i = Norm(φ(K_i)):

    non-causal:  O_n = Q̂_nᵀ [Σ_{i≤N} K̂_i V_iᵀ] / (Q̂_nᵀ [Σ_{i≤N} K̂_i] + ε)
    causal:      O_n = Q̂_nᵀ S_n / (Q̂_nᵀ z_n + ε),   S_n = S_{n-1} + K̂_n V_nᵀ,   z_n = z_{n-1} + K̂_n

    Norm = none: x        l1: x / (‖x‖₁ + ε)        l2: x / (‖x‖₂ + ε)        rms: x / (RMS[x] + ε) ⊙ γ

then out = W_o concat_h O. `--self-attn-type linear --qk-norm {none,l1,l2,rms}`.

Details the paper (Sections 2.1, 4.1 and 4.2) leaves open, and what we chose:
* Feature map φ(x) = elu(x) + 1, elementwise per head: the paper uses "the Linear Transformer [6]", whose map
  this is; no 1/sqrt(d_head) scaling (a kernel, not a softmax).
* ε = 1e-6 everywhere: in the L1/L2/RMS normalizations (the paper's formulas) and added to the attention
  denominator, as Katharopoulos et al.'s code does (fast-transformers, eps=1e-6).
* Normalization is per head, on vectors of size d_head, applied after φ ("consistent with [21]"). RMS: separate
  layers for Q and K, each with ONE trainable γ ∈ R^{d_head} shared by all heads (the paper: "the normalization
  is shared across all attention heads"), initialised to ones (as RMSNorm/LayerNorm). The same normalization is
  used in every attention of the model (encoder self-, decoder self- and cross-attention).
* Cross-attention is linear too (non-causal, Q from the decoder, K/V from the encoder output, same φ and
  normalization): the paper trains "a shared Linear Transformer" encoder-decoder, i.e. Katharopoulos et al.'s
  model, where every attention is linear; it never mentions a softmax cross-attention.
* Padding: K̂ is zeroed at padded key positions before the sums, so pads add nothing to numerator or
  denominator, whatever their V (outputs at padded query positions are computed but never used).
* No attention dropout: there is no probability matrix to drop (fast-transformers ignores its
  attention_dropout argument for linear attention as well); `--attention-dropout` is unused here.
* The causal form is computed in chunks of `chunk_size` positions: within a chunk the masked quadratic form
  (Q̂K̂ᵀ ⊙ tril) V, across chunks the carried state (S, z). Time and memory are linear in the length.
* Incremental decoding keeps only (S [B, H, d, d], z [B, H, d]) per depth for self-attention, so one step costs
  O(1) in the prefix length; cross-attention caches Σ K̂ Vᵀ and Σ K̂ of the source once per sentence (O(1) in the
  source length too). The cache is reordered along the batch for beam search (MultiheadAttention's scheme).

For the orthogonality loss (criterions/orthogonality.py) a non-causal self-attention records, when its
`record_values` flag is set (the criterion sets it; off otherwise, so nothing changes for other uses), the
per-head values V [B, H, N, d_head] (W_v x as projected, pads included, before any dropout) and the
padding mask of every depth it is applied at, in `recorded[depth]`.
"""
from typing import Dict, Optional, Tuple

import torch
import torch.nn as nn
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from torch import Tensor
from torch.autograd.function import once_differentiable

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.attention import IncrementalState, MultiheadAttention, add_projections
from fairseq_compgen.modules.depth_memo import DepthMemo, once_per_pass

QK_NORMS = ("none", "l1", "l2", "rms")
EPS = 1e-6


class _FeatureMap(torch.autograd.Function):
    """φ(x) = elu(x) + 1 with its derivative φ'(x) = exp(min(x, 0)) (1 for x > 0) computed once in forward and
    saved, so backward is one multiplication. Written out because the CPU kernels that autograd would otherwise
    use are slow at SCAN sizes: `elu` backward took 8.5 % of a linear-attention training step, and the `where`
    that replaced it (forward and its backward) 15 % (one thread, [64, 32, 128] floats: `where` ~0.9 ms, a
    multiplication ~0.03 ms). The exponent is clamped at 0 so the branch not taken never overflows."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        slope = x.clamp(max=0.0).exp()  # φ'(x): exp(x) for x ≤ 0, exp(0) = 1 for x > 0
        ctx.save_for_backward(slope)
        return x.clamp(min=0.0).add_(slope)  # x + 1 for x > 0, 0 + exp(x) otherwise

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> Tensor:
        (slope,) = ctx.saved_tensors
        return grad * slope


def feature_map(x: Tensor) -> Tensor:
    """φ(x) = elu(x) + 1 (strictly positive), elementwise: x [any shape] -> [same shape]."""
    return _FeatureMap.apply(x)


class _L2Normalize(torch.autograd.Function):
    """n = y / (‖y‖₂ + ε) per vector y [..., d] (Park & Kim §4.1, "L2"), with the backward written out:

        ∂L/∂y = g / (r + ε) − y (g·y) / (r (r + ε)²),   r = ‖y‖₂, g = ∂L/∂n

    Autograd's version of the same formula runs twice as many full-size kernels, among them a masked_fill
    for r = 0 in the norm's backward that alone took ~4 % of a linear_l2_uni_transformer_scan step on CPU.
    At r = 0 (y = 0) the second term is 0, as autograd's masked norm gradient makes it."""

    @staticmethod
    def forward(ctx, y: Tensor, eps: float) -> Tensor:
        r = y.norm(dim=-1, keepdim=True)  # [..., 1]
        den = r + eps
        ctx.save_for_backward(y, r, den)
        return y / den

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        y, r, den = ctx.saved_tensors
        gy = (grad * y).sum(-1, keepdim=True)  # g·y  [..., 1]
        coef = gy / r.clamp(min=torch.finfo(r.dtype).tiny) / (den * den)  # [..., 1]; r = 0 only where y = 0
        return torch.addcmul(grad / den, y, coef, value=-1.0), None


def qk_normalize(x: Tensor, kind: str, gamma: Optional[Tensor] = None, eps: float = EPS) -> Tensor:
    """Normalize each feature vector x[..., :] on its own (Park & Kim §4.1)."""
    if kind == "none":
        return x
    if kind == "l1":
        return x / (x.abs().sum(-1, keepdim=True) + eps)
    if kind == "l2":
        return _L2Normalize.apply(x, eps)
    if kind == "rms":
        return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * gamma
    raise UsageError(f"--qk-norm must be one of {', '.join(QK_NORMS)}, got {kind!r}")


def noncausal_linear_attention(q: Tensor, k: Tensor, v: Tensor, eps: float = EPS) -> Tensor:
    """q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv] (features, pads already zeroed) -> [B, H, Tq, dv]"""
    S = torch.matmul(k.transpose(-1, -2), v)  # Σ_i K̂_i V_iᵀ  [B, H, d, dv]
    z = k.sum(dim=2)  # Σ_i K̂_i  [B, H, d]
    return _read(q, S, z, eps)


def _read(q: Tensor, S: Tensor, z: Tensor, eps: float = EPS) -> Tensor:
    """O = Q̂ S / (Q̂ z + ε): q [B, H, T, d], S [B, H, d, dv], z [B, H, d] -> [B, H, T, dv]"""
    return torch.matmul(q, S) / (torch.matmul(q, z.unsqueeze(-1)) + eps)


def causal_linear_attention(
    q: Tensor, k: Tensor, v: Tensor, S: Optional[Tensor] = None, z: Optional[Tensor] = None,
    eps: float = EPS, chunk_size: int = 64, with_state: bool = True,
) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
    """Causal linear attention continuing from the state (S, z) of the positions before q[:, :, 0] (None: there
    are none, S = 0). q, k [B, H, T, d], v [B, H, T, dv] -> (out [B, H, T, dv], S [B, H, d, dv], z [B, H, d]) after
    the last step; with with_state=False (training: no decoding cache) the last chunk's state update is skipped
    and (out, None, None) is returned."""
    T = q.size(2)
    outs = []
    for s in range(0, T, chunk_size):
        qc, kc, vc = q[:, :, s:s + chunk_size], k[:, :, s:s + chunk_size], v[:, :, s:s + chunk_size]
        c = qc.size(2)
        # Q̂_n·K̂_i for i ≤ n inside the chunk  [B, H, c, c]; the causal mask as a multiplication (CPU `tril` on
        # the [B, H, c, c] scores cost ~25x a broadcast multiplication, forward and backward alike)
        A = torch.matmul(qc, kc.transpose(-1, -2)) * torch.ones(c, c, dtype=q.dtype, device=q.device).tril_()
        num = torch.matmul(A, vc)  # [B, H, c, dv]
        den = A.sum(-1, keepdim=True)  # [B, H, c, 1]
        if S is not None:  # the positions before the chunk (a fresh sequence's first chunk has none: S = 0)
            num = num + torch.matmul(qc, S)
            den = den + torch.matmul(qc, z.unsqueeze(-1))
        outs.append(num / (den + eps))
        if with_state or s + chunk_size < T:
            S_c, z_c = torch.matmul(kc.transpose(-1, -2), vc), kc.sum(dim=2)  # this chunk's Σ K̂_i V_iᵀ, Σ K̂_i
            S, z = (S_c, z_c) if S is None else (S + S_c, z + z_c)
    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)
    return (out, S, z) if with_state else (out, None, None)


class LinearAttention(FairseqIncrementalState, nn.Module):
    """Drop-in replacement for MultiheadAttention (self- or cross-attention, same forward signature)."""

    def __init__(self, embed_dim: int, num_heads: int, qk_norm: str = "none", bias: bool = False,
                 kv_dim: Optional[int] = None, eps: float = EPS, chunk_size: int = 64):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise UsageError(f"embedding dim {embed_dim} is not divisible by {num_heads} heads")
        if qk_norm not in QK_NORMS:
            raise UsageError(f"--qk-norm must be one of {', '.join(QK_NORMS)}, got {qk_norm!r}")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.qk_norm, self.eps, self.chunk_size = qk_norm, eps, chunk_size
        add_projections(self, embed_dim, kv_dim or embed_dim, bias)
        if qk_norm == "rms":  # one γ for Q and one for K, each shared by all heads
            self.q_gamma = nn.Parameter(torch.ones(self.head_dim))
            self.k_gamma = nn.Parameter(torch.ones(self.head_dim))
        else:
            self.q_gamma = self.k_gamma = None
        self.record_values = False
        self.recorded: Dict[int, Tuple[Tensor, Optional[Tensor]]] = {}  # depth -> (V [B, H, N, dh], pad mask [B, N])

    # the cache layout and beam reordering are MultiheadAttention's
    _heads = MultiheadAttention._heads
    _cache_key = MultiheadAttention._cache_key
    reorder_incremental_state = MultiheadAttention.reorder_incremental_state

    def features(self, x: Tensor, gamma: Optional[Tensor]) -> Tensor:
        """[B, T, C] projections -> Norm(φ(x)) per head, [B, H, T, dh]. φ and Norm run on the contiguous
        [B, T, H, dh] view (elementwise and per-vector ops on a transposed view are 2-4x slower on CPU); the
        result is returned as a transposed view, which is what `_heads` gave before."""
        B, T, _ = x.shape
        x = qk_normalize(feature_map(x.view(B, T, self.num_heads, self.head_dim)), self.qk_norm, gamma, self.eps)
        return x.transpose(1, 2)

    def _keys_values(self, x: Tensor, key_padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """x [B, Tk, C] -> (K̂ with pads zeroed, V), each [B, H, Tk, dh]. Zeroing K̂ alone removes the pads
        from both sums: their terms K̂_i V_iᵀ and K̂_i are then exactly 0 for any finite V_i (and V_i's gradient,
        K̂_i-weighted, is 0 too). The zeroing multiplies a contiguous [B, H, Tk, dh] copy of K̂ by a float keep-mask
        in place (on one CPU thread ~4x faster than masked_fill; the copy is the one the product Kᵀ V would make
        anyway), so the sums over Tk run in the memory order they always had (RMS with small γ amplifies a
        changed summation order far beyond rounding)."""
        k = self.features(self.k_proj(x), self.k_gamma)
        v = self._heads(self.v_proj(x))
        if key_padding_mask is not None:
            keep = (~key_padding_mask).to(k.dtype).view(x.size(0), 1, x.size(1), 1)  # [B, 1, Tk, 1]: 0 at pads
            k = k.contiguous().mul_(keep)
        return k, v

    def _source_sums(self, x: Tensor, key_padding_mask: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """x [B, Tk, C] -> (S = Σ_j K̂_j V_jᵀ [B, H, dh, dh], z = Σ_j K̂_j [B, H, dh]) over the non-pad keys."""
        k, v = self._keys_values(x, key_padding_mask)
        return torch.matmul(k.transpose(-1, -2), v), k.sum(dim=2)

    def forward(
        self,
        query: Tensor,
        key_value: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        causal: bool = False,
        incremental_state: Optional[IncrementalState] = None,
        depth: int = 0,
        memo: Optional[DepthMemo] = None,
    ) -> Tensor:
        """
        query: [B, Tq, C]; key_value: [B, Tk, C] for cross-attention (None: self-attention);
        key_padding_mask: [B, Tk] bool, True at padding; causal: each query sees keys up to itself;
        incremental_state: decoding cache, `query` then holds only the new step(s);
        memo: a shared (Universal) layer's DepthMemo: the source's sums computed once per pass. Returns [B, Tq, C].
        """
        B, Tq, _ = query.shape
        q = self.features(self.q_proj(query), self.q_gamma)  # [B, H, Tq, dh]
        cache = self.get_incremental_state(incremental_state, self._cache_key(depth)) if incremental_state is not None else None
        if key_value is None:  # self-attention
            k, v = self._keys_values(query, key_padding_mask)
            if causal:
                S0, z0 = (cache["S"], cache["z"]) if cache is not None else (None, None)
                out, S, z = causal_linear_attention(q, k, v, S0, z0, self.eps, self.chunk_size,
                                                  with_state=incremental_state is not None)
                if incremental_state is not None:
                    self.set_incremental_state(incremental_state, self._cache_key(depth), {"S": S, "z": z})
            else:
                if incremental_state is not None:
                    raise UsageError("non-causal linear self-attention cannot decode incrementally")
                if self.record_values:
                    self.recorded[depth] = (v, key_padding_mask)
                out = noncausal_linear_attention(q, k, v, self.eps)
        else:  # cross-attention: the source's sums are computed once per sentence
            if causal:
                raise UsageError("causal cross-attention is not defined")
            if cache is not None:
                S, z = cache["S"], cache["z"]
            else:  # [B, H, dh, dh], [B, H, dh]; the same at every depth of a shared layer (modules/depth_memo.py)
                S, z = once_per_pass(memo, (self, "sums", key_value, key_padding_mask),
                                     lambda: self._source_sums(key_value, key_padding_mask))
                if incremental_state is not None:
                    self.set_incremental_state(incremental_state, self._cache_key(depth), {"S": S, "z": z})
            out = _read(q, S, z, self.eps)
        return self.out_proj(out.transpose(1, 2).reshape(B, Tq, self.embed_dim))
