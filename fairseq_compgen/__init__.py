"""fairseq_compgen: Transformer variants, benchmarks and evaluation for compositional generalization.

Use as a fairseq plugin: `fairseq-train --user-dir fairseq_compgen --task compgen --arch rel_uni_transformer ...`.
fairseq imports this package for `--user-dir`; it is imported after fairseq, so the package registers its models,
architectures, tasks and criterions with fairseq at once. Imported on its own (the `fairseq-compgen` command,
fairseq_compgen/cli.py), it does not import fairseq or torch, so `fairseq-compgen --help` answers at once;
Python code that wants the registered models calls :func:`register` (idempotent) first.
"""
import sys

from fairseq_compgen.errors import install_excepthook

__version__ = "0.1.0"


def register() -> None:
    """Register our models, architectures, tasks and criterions with fairseq, and scope fairseq's checkpoint
    loading (checkpoint_loading.py). Idempotent: modules register once, when first imported."""
    from fairseq_compgen import criterions, models, modules, tasks  # noqa: F401
    from fairseq_compgen.checkpoint_loading import wrap_fairseq_loader

    wrap_fairseq_loader()


install_excepthook()  # uncaught UsageErrors print as one line (errors.py)
if "fairseq" in sys.modules:  # imported by fairseq (--user-dir), or after it
    register()
