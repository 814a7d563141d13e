"""The three "parent" heads of the COGS tagging model: how a token names the token it depends on.

Ontañón, Ainslie, Cvicek & Fisher (2022), "Making Transformers Solve Compositional Tasks", ACL,
Section 4.5.1 and Table 12 (and the authors' `cogs_tagging.ipynb`). Every token i of a
sentence of length n has a parent p_i in {0..n-1} or none (p_i = -1). A head maps the final encoder
states x [B, S, C] to logits [B, S, K] over K classes; `to_classes` maps parents to class ids (the
cross-entropy targets) and `to_parents` maps predicted classes back to parents:

* ``absolute``: a dense classifier over the absolute parent index. Classes: 0 = no parent, 1 + p for
  parent p, so K = max_len + 1 (the code's [PAD, -1, 0 .. max_len-1] less PAD, which the loss ignores).
* ``relative``: a dense classifier over the offset p - i, "self" (offset 0) for no parent.
  Classes: (p - i) + max_len - 1, K = 2 max_len - 1.
* ``attention``: the weights of a new 1-head attention are the parent distribution (K = S, the
  positions of the batch): logits_ij = (W_q x_i + b_q).(W_k x_j + b_k) / sqrt(C), padded keys masked,
  no parent = pointing to itself (j = i). With a position scorer (the encoder's `--self-attn-pos`, e.g.
  `rel-eb`: the code gives this attention 2R+1 = 33 relative embeddings of size C and, for rel-eb,
  biases) its terms are added as in every other attention (modules/positions/base.py), with 1 head.

Parents a class cannot express (absolute or relative class outside K, attention to a padded key) are
returned as `INVALID` by `to_parents`, so a prediction holding one is wrong, never silently clipped.
"""
from typing import Dict, Optional, Type

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_compgen.errors import UsageError

NO_PARENT = -1
INVALID = -2  # a predicted class naming no position of the sentence
IGNORE = -100  # padding in targets (cross_entropy's ignore_index)

PARENT_HEADS: Dict[str, Type["ParentHead"]] = {}


def _register(name: str):
    def wrap(cls):
        PARENT_HEADS[name] = cls
        return cls

    return wrap


class ParentHead(nn.Module):
    def forward(self, x: Tensor, pad: Tensor) -> Tensor:
        """x [B, S, C], pad [B, S] (True at padding) -> logits [B, S, K]."""
        raise NotImplementedError

    def to_classes(self, parent: Tensor) -> Tensor:
        """parent [B, S]: position, NO_PARENT, or IGNORE at padding -> class ids [B, S] (IGNORE kept)."""
        raise NotImplementedError

    def to_parents(self, classes: Tensor) -> Tensor:
        """predicted classes [B, S] -> parents [B, S]: position, NO_PARENT, or INVALID."""
        raise NotImplementedError


def _check_range(classes: Tensor, valid: Tensor, k: int, what: str) -> None:
    bad = valid & ((classes < 0) | (classes >= k))
    if bool(bad.any()):
        raise UsageError(f"{what} parent head has {k} classes (--tagger-max-len); a target needs class "
                         f"{int(classes[bad][0])}: raise --tagger-max-len to the longest sentence")


@_register("absolute")
class AbsoluteParentHead(ParentHead):
    def __init__(self, dim: int, max_len: int, scorer: Optional[nn.Module] = None):
        super().__init__()
        self.max_len = max_len
        self.proj = nn.Linear(dim, max_len + 1)

    def forward(self, x, pad):
        return self.proj(x)  # [B, S, max_len + 1]

    def to_classes(self, parent):
        valid = parent != IGNORE
        classes = torch.where(valid, parent + 1, parent)  # none (-1) -> 0, p -> p + 1
        _check_range(classes, valid, self.max_len + 1, "absolute")
        return classes

    def to_parents(self, classes):
        S = classes.size(1)
        parent = classes - 1
        return torch.where(parent < S, parent, torch.full_like(parent, INVALID))


@_register("relative")
class RelativeParentHead(ParentHead):
    def __init__(self, dim: int, max_len: int, scorer: Optional[nn.Module] = None):
        super().__init__()
        self.max_len = max_len
        self.proj = nn.Linear(dim, 2 * max_len - 1)

    def forward(self, x, pad):
        return self.proj(x)  # [B, S, 2 max_len - 1]

    def to_classes(self, parent):
        valid = parent != IGNORE
        i = torch.arange(parent.size(1), device=parent.device)[None, :]  # [1, S]
        offset = torch.where(parent == NO_PARENT, torch.zeros_like(parent), parent - i)  # none -> self
        classes = torch.where(valid, offset + self.max_len - 1, parent)
        _check_range(classes, valid, 2 * self.max_len - 1, "relative")
        return classes

    def to_parents(self, classes):
        S = classes.size(1)
        i = torch.arange(S, device=classes.device)[None, :]
        offset = classes - (self.max_len - 1)
        parent = torch.where(offset == 0, torch.full_like(classes, NO_PARENT), i + offset)
        outside = (offset != 0) & ((parent < 0) | (parent >= S))
        return parent.masked_fill(outside, INVALID)


@_register("attention")
class AttentionParentHead(ParentHead):
    def __init__(self, dim: int, max_len: int = 0, scorer: Optional[nn.Module] = None):
        super().__init__()
        self.query = nn.Linear(dim, dim)  # the code's Dense(d) layers (with bias)
        self.key = nn.Linear(dim, dim)
        self.scorer = scorer  # built for 1 head of size dim
        self.scale = dim**-0.5

    def forward(self, x, pad):
        S = x.size(1)
        q = self.query(x).unsqueeze(1)  # [B, 1, S, C]: one head
        k = self.key(x).unsqueeze(1)  # [B, 1, S, C]
        if self.scorer is None:
            logits = self.scale * q @ k.transpose(-1, -2)  # [B, 1, S, S]
        else:  # the hooks of modules/positions/base.py, as in every attention
            pos = torch.arange(S, device=x.device)
            q, k = self.scorer.rotate(q, k, pos, pos)
            logits = self.scale * self.scorer.content_query(q) @ k.transpose(-1, -2)  # [B, 1, S, S]
            bias = self.scorer.bias(q, pos, pos, self.scale, k=k)  # broadcastable to [B, 1, S, S]
            if bias is not None:
                logits = logits + bias
        return logits.squeeze(1).masked_fill(pad[:, None, :], float("-inf"))  # [B, S(token), S(parent)]

    def to_classes(self, parent):
        i = torch.arange(parent.size(1), device=parent.device)[None, :].expand_as(parent)
        return torch.where(parent == NO_PARENT, i, parent)  # none -> self; IGNORE and positions kept

    def to_parents(self, classes):
        i = torch.arange(classes.size(1), device=classes.device)[None, :]
        return torch.where(classes == i, torch.full_like(classes, NO_PARENT), classes)


def build_parent_head(name: str, dim: int, max_len: int, scorer: Optional[nn.Module] = None) -> ParentHead:
    if name not in PARENT_HEADS:
        raise UsageError(f"unknown --tagger-parent-head {name!r}; choose from {', '.join(sorted(PARENT_HEADS))}")
    if name != "attention" and max_len < 1:
        raise UsageError(f"the {name} parent head needs --tagger-max-len >= 1, got {max_len}")
    return PARENT_HEADS[name](dim, max_len, scorer)
