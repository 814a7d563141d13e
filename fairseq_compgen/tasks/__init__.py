"""Tasks (`--task`)."""
from fairseq_compgen.tasks import compgen  # noqa: F401
