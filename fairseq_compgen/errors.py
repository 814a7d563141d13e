"""Misuse errors: one line for the user instead of a traceback.

`UsageError` is what our code raises for input a user can fix (a flag that cannot take effect, a checkpoint that
does not belong to the data, a corrupt file). Importing the package (which `--user-dir fairseq_compgen` does)
installs a `sys.excepthook` that prints an uncaught UsageError as `fairseq_compgen: error: <message>` and nothing
else; the process still exits with status 1. A missing file the user named (FileNotFoundError, fairseq's "Model
file not found") is printed the same way. Every other exception keeps its full traceback (a bug is not a misuse).
"""
import sys


class UsageError(ValueError):
    """A misuse the user can fix; the message names the file/line or flag and what was expected."""


class MissingFileError(UsageError, FileNotFoundError):
    """A file the user named (or a step before should have made) does not exist; the message names it."""


_previous_hook = None


def is_misuse(exc: BaseException) -> bool:
    """Ours (UsageError), or a path the user gave that does not exist: a FileNotFoundError, or fairseq's
    `OSError("Model file not found: PATH")` for a missing `--path` / `--restore-file`."""
    return isinstance(exc, (UsageError, FileNotFoundError)) or (
        type(exc) is OSError and str(exc).startswith("Model file not found"))


def _hook(exc_type, exc, tb):
    if is_misuse(exc):
        print(f"fairseq_compgen: error: {exc}", file=sys.stderr)
    else:
        _previous_hook(exc_type, exc, tb)


def install_excepthook() -> None:
    """Print uncaught UsageErrors as one line (idempotent; other exceptions go to the previous hook)."""
    global _previous_hook
    if sys.excepthook is not _hook:
        _previous_hook = sys.excepthook
        sys.excepthook = _hook
