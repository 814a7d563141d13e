"""Old import path (before the positions wing) of the attention position interface; see modules/positions/."""
from typing import Callable, Dict, Optional

import torch.nn as nn

from fairseq_compgen.modules.positions import ATTENTION_SITES, ENCODINGS, build_attention_position
from fairseq_compgen.modules.positions import DECODER_SELF, ENCODER_SELF
from fairseq_compgen.modules.positions.base import AttentionPosition as PositionScorer  # noqa: F401
from fairseq_compgen.modules.positions.base import relative_distances  # noqa: F401

# name -> class of every attention encoding that builds a module (a live view would need a Mapping; the
# registry is complete once fairseq_compgen.modules.positions is imported, as it is here)
SCORERS: Dict[str, Callable[..., nn.Module]] = {n: e.cls for n, e in ENCODINGS.items()
                                                if e.cls is not None and e.sites & set(ATTENTION_SITES)}


def build_scorer(name: Optional[str], *, embed_dim: int, num_heads: int, causal: bool, **options) -> Optional[nn.Module]:
    """The encoding `name` for a self-attention (decoder if `causal`), options by parameter name (span=, radius=)."""
    site = DECODER_SELF if causal else ENCODER_SELF
    if name not in (None, "none") and site not in ENCODINGS.get(name, ENCODINGS["none"]).sites:
        from fairseq_compgen.modules.positions import CROSS
        site = CROSS
    return build_attention_position(name, site, embed_dim=embed_dim, num_heads=num_heads, **options)
