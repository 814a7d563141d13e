"""Tasks (`--task`)."""
from fairseq_compgen.tasks import compgen  # noqa: F401
from fairseq_compgen.tasks import cogs_tagging  # noqa: F401,I001  (Ontañón et al. 2022 §4.5.1: task + criterion)
