"""Misuse errors: one line for the user instead of a traceback.

`UsageError` is what our code raises for input a user can fix (a flag that cannot take effect, a checkpoint that
does not belong to the data, a corrupt file). Importing the package (which `--user-dir fairseq_compgen` does)
installs a `sys.excepthook` that prints an uncaught UsageError as `fairseq_compgen: error: <message>` and nothing
else; the process still exits with status 1. A missing file the user named (FileNotFoundError, fairseq's "Model
file not found") is printed the same way, and so is an OSError about a path the user chose (a file where a folder
was expected, no permission, a read-only or full disk: `_EXPECTED`). Every other exception keeps its full traceback
(a bug is not a misuse).
"""
from __future__ import annotations

import atexit
import os
import sys


ERROR_PREFIX = "fairseq_compgen: error: "  # how a misuse is printed: this, then the message, one line


class UsageError(ValueError):
    """A misuse the user can fix; the message names the file/line or flag and what was expected."""


class MissingFileError(UsageError, FileNotFoundError):
    """A file the user named (or a step before should have made) does not exist; the message names it."""


class Interrupted(Exception):
    """Ctrl-C (SIGINT) stopped a command; the message says what was kept and how to resume. The `fairseq-compgen`
    command prints it as one line, `fairseq_compgen: interrupted: <message>`, and exits with 130."""


_previous_hook = None


def is_misuse(exc: BaseException) -> bool:
    """Ours (UsageError), or a path the user gave that does not exist: a FileNotFoundError, or fairseq's
    `OSError("Model file not found: PATH")` for a missing `--path` / `--restore-file`."""
    return isinstance(exc, (UsageError, FileNotFoundError)) or (
        type(exc) is OSError and str(exc).startswith("Model file not found"))


def _hook(exc_type, exc, tb):
    if is_misuse(exc):
        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr)
    elif _path_error_line(exc) is not None:
        print(f"{ERROR_PREFIX}{_path_error_line(exc)}", file=sys.stderr)
    else:
        _previous_hook(exc_type, exc, tb)


def install_excepthook() -> None:
    """Print uncaught UsageErrors as one line (idempotent; other exceptions go to the previous hook)."""
    global _previous_hook
    if sys.excepthook is not _hook:
        _previous_hook = sys.excepthook
        sys.excepthook = _hook


# An OSError about a path the user chose (an output folder that is a file, no permission, a full disk) is a misuse
# too: the hook prints it as one line naming the path, with what was expected.
_EXPECTED = {
    "ENOTDIR": "a part of this path is a file: expected folders (or nothing) there",
    "EEXIST": "a file is in the way: expected a folder there (or nothing)",
    "EISDIR": "expected a file, not a folder",
    "EACCES": "no permission: expected a location you can write to (and read)",
    "EPERM": "not permitted: expected a location you can write to (and read)",
    "EROFS": "read-only file system: expected a location you can write to",
    "ENOSPC": "no space left on the device: expected room for the output (free some, or choose another folder)",
    "EDQUOT": "disk quota exceeded: expected room for the output (free some, or choose another folder)",
    "EFBIG": "file too large for this file system or limit: expected room for the output (choose another folder)",
}


def _path_error_line(exc: BaseException) -> str | None:
    """One line for an OSError of _EXPECTED's kinds that names its file; None for any other exception."""
    import errno

    if not isinstance(exc, OSError) or exc.filename is None:
        return None
    name = errno.errorcode.get(exc.errno or 0)
    if name not in _EXPECTED:
        return None
    where = f"{exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 is not None else "")
    return f"{where}: {exc.strerror} ({_EXPECTED[name]})"


def check_output_folder(path, flag: str) -> None:
    """UsageError unless `path` is a folder this process can write to, or can be made as one (every part of it that
    exists is a folder, the deepest existing one writable). `flag` names it in the message (e.g. "--out")."""
    import os
    from pathlib import Path

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file: expected a folder (or a path where one can be made)")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is a file, so no folder can be made there: expected a folder "
                         f"(or a path where one can be made)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: no write permission on {existing}: expected a folder you can write to")


def read_json(path, expected: str):
    """The JSON in `path`; a file that is not valid JSON (half-written, edited) is a UsageError naming the file,
    its line and `expected` (what should be there and how to get it back)."""
    import json
    from pathlib import Path

    path = Path(path)
    text = path.read_bytes()
    try:
        return json.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text: expected {expected}") from None
    except ValueError as e:
        raise UsageError(f"{path}:{getattr(e, 'lineno', 1)}: not valid JSON ({getattr(e, 'msg', e)}): "
                         f"expected {expected}") from None


def exit_before_finalizing(rc: int) -> None:
    """Exit with RC once the exit handlers have run (fairseq's TensorBoard writers close there) and the output is
    flushed, but without Python's finalization. fairseq's batch iterator prefetches on a daemon thread
    (`fairseq.data.iterators.BackgroundConsumer`); stopped mid-epoch (by Ctrl-C, or by --max-update), that thread
    can be inside a torch call when the interpreter finalizes, and Python 3.11 then ends it with `pthread_exit`
    through torch's C++ frames: "terminate called without an active exception", SIGABRT (-6) instead of the status
    meant. It did, 3 times in 15 Ctrl-Cs on a loaded machine (a core dump showed that thread in
    `THPVariable_index_scalar` under `take_gil`), and once to a torchrun rank that had finished training (CI,
    2026-11-28). Only for a process's last step: `fairseq-compgen` on Ctrl-C, a torchrun worker when it is done."""
    atexit._run_exitfuncs()  # what `sys.exit` would run first (Python's atexit docs: the handlers registered)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, or a closed stream: nothing left to say
            pass
    os._exit(rc)
