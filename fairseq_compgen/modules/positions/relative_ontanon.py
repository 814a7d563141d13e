"""Relative position labels of Ontañón, Ainslie, Cvicek, Fisher (2022), "Making Transformers Solve
Compositional Tasks", §4.1 and Figure 2.

Every query/key pair gets one of 2R+1 labels (R = `--rel-radius`, 16 in the paper), the clipped distance
c = clip(j - i, -R, R) + R (the paper's l_{j-i}; the authors' code uses i - j, immaterial since labels are
learned). Per attention sublayer, shared across its heads (§4.1; the authors' code for the exact terms):

    rel-e :  e_ij = ( q_i.k_j + q_i.r_c       ) / sqrt(d_h)       r: [2R+1, d_h]  (embedding added to the key)
    rel-b :  e_ij = ( q_i.k_j         + b_c   ) / sqrt(d_h)       b: [2R+1]       (scalar bias, before scaling)
    rel-eb:  e_ij = ( q_i.k_j + q_i.r_c + b_c ) / sqrt(d_h)

Both tables are initialised U[-0.05, 0.05] (Keras' Embedding default). Values are not modified.

In decoder-to-encoder attention (`--cross-attn-pos`):
* `rel2-*` models use the same scorers, with i the 0-based decoder-input position (0 = the BOS/EOS the
  decoder starts from) and j the 0-based position of the source token counted from the first *real* token,
  so left-padded sources get the labels an unpadded source would (the attention module passes per-example
  key positions [B, Tk], see `MultiheadAttention(key_positions_from_padding=True)`).
* `rel-*` models: the authors' code gives every cross pair the constant label l_0 (`rel0-e/-b/-eb`): the
  term is the same for every key and cancels in the softmax (no position information), but the tables
  exist, which is why Table 11 counts the same parameters for rel-e and rel2-e.

q.r_c is computed once per label ([B, H, Tq, 2R+1]), b added and scaled there, and gathered into [B, H, Tq, Tk]
(`gather_labels`); never an embedding per pair ([B, H, Tq, Tk, d_h]). With the constant l_0 the term is one column,
[B, H, Tq, 1], broadcast over the keys.
"""
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.positions.base import AttentionPosition
from fairseq_compgen.modules.positions.registry import CROSS, DECODER_SELF, ENCODER_SELF, Option, register_position

DEFAULT_RADIUS = 16
RADIUS = Option("rel_radius", "radius", int, DEFAULT_RADIUS,
                "clipping radius of the rel-*/rel0-* labels (2R+1 labels; Ontañón et al. 2022: 16)", metavar="R")


def clipped_labels(q_pos: Tensor, k_pos: Tensor, radius: int) -> Tensor:
    """Label ids clip(j - i, -R, R) + R in [0, 2R].

    q_pos [Tq]; k_pos [Tk] -> [Tq, Tk], or k_pos [B, Tk] (per-example key positions) -> [B, Tq, Tk].
    """
    if k_pos.dim() == 1:
        d = k_pos[None, :] - q_pos[:, None]
    else:
        d = k_pos[:, None, :] - q_pos[None, :, None]
    return d.clamp(-radius, radius) + radius


def gather_labels(table: Tensor, labels: Tensor) -> Tensor:
    """table [B, H, Tq, n] (a score per label), labels [Tq, Tk] or [B, Tq, Tk] -> scores [B, H, Tq, Tk]."""
    B, H, Tq, _ = table.shape
    idx = labels if labels.dim() == 3 else labels.unsqueeze(0).expand(B, -1, -1)
    idx = idx.unsqueeze(1).expand(B, H, Tq, idx.size(-1))
    return table.gather(-1, idx)


def _bias_shape(b: Tensor) -> Tensor:
    """Label biases [Tq, Tk] stay as they are; per-example [B, Tq, Tk] become [B, 1, Tq, Tk]."""
    return b if b.dim() == 2 else b.unsqueeze(1)


class OntanonRelative(AttentionPosition):
    """Relative label embeddings (`use_embedding`) and/or biases (`use_bias`), clipped at radius R."""

    use_embedding = True
    use_bias = True
    constant_label = False  # the authors' `rel-*` cross-attention: every pair gets label l_0

    def __init__(self, embed_dim: int, num_heads: int, causal: bool, radius: Optional[int] = DEFAULT_RADIUS):
        super().__init__()
        self.radius = int(DEFAULT_RADIUS if radius is None else radius)  # 0 is refused below, not replaced
        if self.radius < 1:
            raise UsageError(f"--rel-radius must be >= 1, got {self.radius}")
        n = 2 * self.radius + 1
        self.head_dim = embed_dim // num_heads
        self.rel_embedding = nn.Parameter(torch.empty(n, self.head_dim)) if self.use_embedding else None  # r
        self.rel_bias = nn.Parameter(torch.empty(n)) if self.use_bias else None  # b
        for p in (self.rel_embedding, self.rel_bias):
            if p is not None:
                nn.init.uniform_(p, -0.05, 0.05)

    def labels(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        if self.constant_label:
            shape = (q_pos.numel(), k_pos.size(-1)) if k_pos.dim() == 1 else (k_pos.size(0), q_pos.numel(), k_pos.size(-1))
            return torch.full(shape, self.radius, dtype=torch.long, device=q_pos.device)
        return clipped_labels(q_pos, k_pos, self.radius)

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float, k: Optional[Tensor] = None) -> Tensor:
        """q [B, H, Tq, dh]; q_pos [Tq]; k_pos [Tk] or [B, Tk] -> scale * (q_i.r_c + b_c), broadcastable to
        [B, H, Tq, Tk].

        The position term of every label is computed once per query, table[b, h, i, n] = scale * (q_i.r_n + b_n)
        ([B, H, Tq, 2R+1]), then picked per key by its label: elementwise the same operations as adding b_c to the
        gathered q_i.r_c and scaling the [B, H, Tq, Tk] result, so the same values, with one gather (whose
        gradient also gives b's) instead of a gather and an index.
        """
        R, b = self.radius, self.rel_bias
        if self.rel_embedding is None:  # rel-b: no per-query table, scalar biases by label
            if self.constant_label:
                return (b[R:R + 1].to(q.dtype) * scale).view(1, 1)  # [1, 1]: every pair has l_0 (id R)
            return _bias_shape(b.to(q.dtype)[self.labels(q_pos, k_pos)]) * scale  # [Tq, Tk] or [B, 1, Tq, Tk]
        # every label's q_i.r_n, even where only l_0 is used: a one-column product sums in another order
        table = torch.matmul(q, self.rel_embedding.to(q.dtype).t())  # [B, H, Tq, n]
        if self.constant_label:  # every pair has l_0 (id R): one column, the same for every key
            table = table[..., R:R + 1]  # [B, H, Tq, 1]
            if b is not None:
                table = table + b[R:R + 1].to(q.dtype)
            return table * scale  # [B, H, Tq, 1]
        if b is not None:
            table.add_(b.to(q.dtype))  # in place: a fresh product, not needed for its gradient
        return gather_labels(table.mul_(scale), self.labels(q_pos, k_pos))  # [B, H, Tq, Tk]


def _register(name: str, embedding: bool, bias: bool, constant: bool):
    cls = type(f"OntanonRelative_{name.replace('-', '_')}", (OntanonRelative,),
               {"use_embedding": embedding, "use_bias": bias, "constant_label": constant,
                "__doc__": f"`{name}` of Ontañón et al. (2022) §4.1"
                           + (" with the constant label l_0 (the authors' rel-* cross-attention)" if constant else "")})
    parts = {"e": "an embedding added to the key", "b": "a scalar bias", "eb": "both"}[name.split("-")[1]]
    help = (f"the constant label l_0 for every pair with {parts} (the authors' rel-* models' cross-attention: "
            f"no position information, same parameters)" if constant else
            f"relative labels l_(j-i) clipped at --rel-radius, {parts}, shared across heads (in cross-attention: "
            f"decoder step i, source position j from the first real token, the rel2-* models)")
    sites = (CROSS,) if constant else (ENCODER_SELF, DECODER_SELF, CROSS)
    return register_position(name, sites=sites, paper="Ontañón et al. 2022 §4.1", help=help, options=(RADIUS,))(cls)


for _kind, (_e, _b) in {"e": (True, False), "b": (False, True), "eb": (True, True)}.items():
    _register(f"rel-{_kind}", _e, _b, False)
    _register(f"rel0-{_kind}", _e, _b, True)
