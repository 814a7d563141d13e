"""fairseq_compgen: Transformer variants, benchmarks and evaluation for compositional generalization.

Use as a fairseq plugin: `fairseq-train --user-dir fairseq_compgen --task compgen --arch rel_uni_transformer ...`.
fairseq imports this package for `--user-dir`; it is imported after fairseq, so the package registers its models,
architectures, tasks and criterions with fairseq at once. Imported on its own (the `fairseq-compgen` command,
fairseq_compgen/cli.py), it does not import fairseq or torch, so `fairseq-compgen --help` answers at once;
Python code that wants the registered models calls :func:`register` (idempotent) first.
"""
import sys

from fairseq_compgen.errors import UsageError, install_excepthook

__version__ = "0.1.0"


def register() -> None:
    """Register our models, architectures, tasks and criterions with fairseq, and scope fairseq's checkpoint
    loading (checkpoint_loading.py). Idempotent: modules register once, when first imported."""
    from fairseq_compgen import criterions, models, modules, tasks  # noqa: F401
    from fairseq_compgen.checkpoint_loading import wrap_fairseq_loader

    wrap_fairseq_loader()


def import_user_dir(path, flag: str = "--user-dir") -> None:
    """Import a user's plugin folder (a package whose __init__.py registers their own position encodings, models or
    tasks), as fairseq-train's --user-dir does, for the commands of ours that load models without fairseq's parser:
    `fairseq-compgen eval --user-dir` (a checkpoint that uses the plugin's encoding) and `fairseq-compgen help
    --user-dir` (its encodings listed). `flag` names the option in the error."""
    import argparse
    import os

    from fairseq.utils import import_user_module

    register()
    if not os.path.isfile(os.path.join(path, "__init__.py")):
        raise UsageError(f"{flag} {path}: expected a plugin folder with an __init__.py (as fairseq-train's --user-dir)")
    try:
        import_user_module(argparse.Namespace(user_dir=os.path.abspath(path)))
    except ImportError as e:  # e.g. a folder named like a module already imported (fairseq: "not globally unique")
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UsageError(f"{flag} {path}: the plugin could not be imported: {why}") from None


install_excepthook()  # uncaught UsageErrors print as one line (errors.py)
if "fairseq" in sys.modules:  # imported by fairseq (--user-dir), or after it
    register()
