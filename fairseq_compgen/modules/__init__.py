"""Building blocks: attention with pluggable position scorers, layers, layer stacks, embeddings.

Importing this package registers every position scorer (`--self-attn-pos`).
"""
from fairseq_compgen.modules import relative_txl  # noqa: F401  (registers "txl")
from fairseq_compgen.modules import span_scorers  # noqa: F401  (registers "t5", "fixed_span")
from fairseq_compgen.modules import relative_ontanon  # noqa: F401  (registers "rel-e/b/eb", "rel0-e/b/eb")
