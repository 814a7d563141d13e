"""Training criteria (`--criterion`). Importing this package registers them with fairseq."""
from fairseq_compgen.criterions import orthogonality  # noqa: F401  (label_smoothed_cross_entropy_with_orthogonality)
