"""The interface by which position information enters attention logits, and the registry of scorers.

A scorer is asked, for queries at absolute positions `q_pos` [Tq] and keys at `k_pos` [Tk]:
  * `content_query(q)`: the query used for content addressing (Transformer-XL adds the global bias u);
  * `bias(q, q_pos, k_pos, scale)`: additive logits broadcastable to [B, H, Tq, Tk] (already scaled), or None.
During incremental decoding q_pos holds the current step, so every scorer works step by step.

Scorers register themselves by name with `@register_scorer("name")`; `--self-attn-pos NAME` picks one. Each
takes typed arguments (embed_dim, num_heads, causal, and its own: `span` for t5 / fixed_span, `radius` for the
rel-* labels), so it can be used from plain PyTorch with `MultiheadAttention(..., scorer=...)`.
"""
import inspect
from typing import Callable, Dict, Optional

import torch.nn as nn
from torch import Tensor

from fairseq_compgen.errors import UsageError

SCORERS: Dict[str, Callable[..., nn.Module]] = {}


def register_scorer(name: str):
    def wrap(cls):
        if name in SCORERS:
            raise UsageError(f"position scorer {name!r} registered twice")
        SCORERS[name] = cls
        return cls

    return wrap


class PositionScorer(nn.Module):
    """Base class: no change to the content query, no bias."""

    def content_query(self, q: Tensor) -> Tensor:
        return q

    def bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor, scale: float) -> Optional[Tensor]:
        return None


def build_scorer(name: Optional[str], *, embed_dim: int, num_heads: int, causal: bool,
                 **options) -> Optional[nn.Module]:
    """`name` "none" -> None; otherwise the registered scorer, given those `options` (e.g. span=4, radius=16)
    that its constructor takes."""
    if name in (None, "none"):
        return None
    if name not in SCORERS:
        raise UsageError(f"unknown position scorer {name!r}; choose from none, {', '.join(sorted(SCORERS))}")
    cls = SCORERS[name]
    accepted = inspect.signature(cls).parameters
    return cls(embed_dim=embed_dim, num_heads=num_heads, causal=causal,
               **{k: v for k, v in options.items() if k in accepted})


def relative_distances(q_pos: Tensor, k_pos: Tensor) -> Tensor:
    """Signed distance key minus query, j - i: [Tq, Tk] (the authors' code convention, spec_000 §2.3)."""
    return k_pos[None, :] - q_pos[:, None]
