"""Building blocks: attention with pluggable position encodings, layers, layer stacks, embeddings.

Importing this package registers every position encoding (modules/positions/).
"""
from fairseq_compgen.modules import positions  # noqa: F401  (registers the position encodings)
