"""The token embedding, its scaling schemes (Csordás et al. 2021) and the absolute positions added to it.

Csordás, Irie, Schmidhuber (2021), "The Devil is in the Detail: Simple Tricks Improve Systematic
Generalization of Transformers", §3.3 and App. D:

    P[pos, 2k]   = sin(pos / 10000^(2k/d))
    P[pos, 2k+1] = cos(pos / 10000^(2k/d))

    teu  (Token Embedding Upscaling, Vaswani):  E ~ Xavier-uniform,   H = sqrt(d) * E[w] + P
    none (PyTorch default):                     E ~ N(0, 1),          H = E[w] + P
    ped  (Position Embedding Downscaling):      E ~ Kaiming-normal,   H = E[w] + P / sqrt(d)

PED uses `kaiming_normal_` with its default arguments, as the authors' code does (std = sqrt(2/d));
the paper text (App. D) says std 1/sqrt(d). Models without absolute positions
(relative attention) use Xavier-uniform embeddings and no scaling, as in the authors' code.

One more scheme, `keras`, is the embedding of the TensorFlow Transformer tutorial that every model of
Ontañón et al. (2022) builds on (Ontañón et al., App. A, which says it strongly affects results):

    keras:                                      E ~ U[-0.05, 0.05],   H = sqrt(d) * E[w] (+ P for `abs`)

It keeps the sqrt(d) scaling without absolute positions too (`positions=False`).

And `fairseq`, the embedding of fairseq's `transformer` that Chaabouni et al. (2021) §3 say they used "with its
initialization and default parameters" (fairseq's `Embedding` and `SinusoidalPositionalEmbedding`):

    fairseq:                                    E ~ N(0, d^-1/2),     H = sqrt(d) * E[w] + P'[pos + pad + 1]
    P'[p, k] = sin(p w_k), P'[p, k + d/2] = cos(p w_k), w_k = 10000^(-k / (d/2 - 1)), k < d/2

i.e. the sines in the first half and the cosines in the second (not interleaved), a frequency step of
ln(10000) / (d/2 - 1), and positions offset by padding_idx + 1 (fairseq's `make_positions`).

The absolute positions themselves are position encodings of the INPUT site (`--absolute-positions`, the registry of
modules/positions/): `sinusoidal` (modules/positions/sinusoidal.py, both layouts above), `learned`, or none.
"""
import math
from typing import Optional, Union

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.dropout import Dropout
from fairseq_compgen.modules.positions.registry import build_input_position

EMBEDDING_SCALINGS = ("teu", "none", "ped", "keras", "fairseq")


def positions_from_padding(tokens: Tensor, padding_idx: int, start: int = 0) -> Tensor:
    """0-based positions of the non-pad tokens (pads on either side are skipped). [B, T] -> [B, T]."""
    not_pad = tokens.ne(padding_idx).long()
    return (torch.cumsum(not_pad, dim=1) - 1).clamp(min=0) + start


class TokenEmbedding(nn.Module):
    """Token embedding plus (optionally) absolute positions, scaled by one of the schemes above.

    `scaling=None`: Xavier-uniform init, no scaling (relative-attention models). `positions`: the name of an
    absolute-position encoding (`--absolute-positions`; True means sinusoidal, False none) given `position_options`.
    """

    def __init__(self, num_embeddings: int, dim: int, padding_idx: int, scaling: Optional[str], dropout: float,
                 positions: Union[bool, str] = True, position_options: Optional[dict] = None):
        super().__init__()
        if scaling is not None and scaling not in EMBEDDING_SCALINGS:
            raise UsageError(f"--embedding-scaling must be one of {EMBEDDING_SCALINGS}, got {scaling!r}")
        self.dim, self.padding_idx, self.scaling = dim, padding_idx, scaling
        self.embed = nn.Embedding(num_embeddings, dim, padding_idx=padding_idx)
        if scaling in (None, "teu"):
            nn.init.xavier_uniform_(self.embed.weight)
        elif scaling == "none":
            nn.init.normal_(self.embed.weight, 0.0, 1.0)
        elif scaling == "keras":
            nn.init.uniform_(self.embed.weight, -0.05, 0.05)
        elif scaling == "fairseq":
            nn.init.normal_(self.embed.weight, 0.0, dim ** -0.5)
        else:  # ped
            nn.init.kaiming_normal_(self.embed.weight)
        with torch.no_grad():
            self.embed.weight[padding_idx].zero_()
        self.token_scale = math.sqrt(dim) if scaling in ("teu", "keras", "fairseq") else 1.0
        self.position_scale = 1.0 / math.sqrt(dim) if scaling == "ped" else 1.0
        self.dropout = Dropout(dropout)
        name = {True: "sinusoidal", False: "none"}.get(positions, positions)
        # built after the token table, so the random draws of existing models are unchanged
        self.positions = build_input_position(name, embed_dim=dim, padding_idx=padding_idx, scaling=scaling,
                                              **(position_options or {}))  # None: no absolute positions

    @property
    def weight(self) -> Tensor:
        return self.embed.weight

    def forward(self, tokens: Tensor, start: int = 0, positions: Optional[Tensor] = None) -> Tensor:
        """tokens [B, T] -> [B, T, dim]; `start` is the position of tokens[:, 0] during incremental decoding;
        `positions` [>= T] replace 0, 1, ... by column (randomized positions: the token in column c gets
        positions[c], as every self-attention of the stack reads them; positions/randomized.py)."""
        x = self.embed(tokens) * self.token_scale
        if self.positions is not None:
            if positions is None:
                pos = positions_from_padding(tokens, self.padding_idx, start)  # [B, T], from the first real token
            else:
                pos = positions[start:start + tokens.size(1)].expand_as(tokens)  # [B, T]
            p = self.positions(pos)  # [B, T, dim]
            if self.position_scale != 1.0:
                p = self.position_scale * p
            x = x + p.to(x.dtype)
        return self.dropout(x)
