"""Small I/O helpers shared by the data code: atomic writes and data errors.

Used by the SCAN generator/reader (Lake & Baroni 2018, "Generalization without
systematicity", ICML) and the exact-match scorer.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tarfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Union

from fairseq_compgen.errors import MissingFileError, UsageError

PathLike = Union[str, "os.PathLike[str]"]


class DataError(UsageError):
    """A malformed line in a data file.

    ``str(DataError(path, lineno, expected, line))`` reads
    ``"<path>:<lineno>: <expected>; got: '<line truncated to 80 chars>'"``.
    ``lineno`` is 1-based.
    """

    MAX_SHOWN = 80

    def __init__(self, path: PathLike, lineno: int, expected: str, line: str | None = None):
        self.path = os.fspath(path)
        self.lineno = lineno
        self.expected = expected
        self.line = line
        msg = f"{self.path}:{lineno}: {expected}"
        if line is not None:
            shown = line.rstrip("\r\n")
            if len(shown) > self.MAX_SHOWN:
                shown = shown[: self.MAX_SHOWN] + "..."
            msg += f"; got: {shown!r}"
        super().__init__(msg)


@contextmanager
def staged_path(path: PathLike, hidden: bool = False) -> Iterator[Path]:
    """Yields a temporary path in ``path``'s folder; on success it is renamed to ``path`` (``os.replace``), on any
    error it is removed and ``path`` is left untouched. Parent folders are created. ``hidden`` prefixes a dot."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{'.' if hidden else ''}{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _stale(folder: Path, prefix: str) -> list:
    """Entries ``<prefix><pid>`` of ``folder`` whose process is no longer running."""
    out = []
    for p in folder.glob(prefix + "*"):
        pid = p.name[len(prefix):]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            out.append(p)
    return out


@contextmanager
def staged_dir(path: PathLike, whole_folder: bool = True) -> Iterator[Path]:
    """Yields an empty staging folder ``.<name>.tmp-<pid>`` beside the folder ``path``; everything an output
    is made of (text, binaries, tokenizer models) is built there.

    On success the staging folder takes the place of ``path`` by renames only (the old folder is moved to
    ``.<name>.old-<pid>``, the staging folder renamed to ``path``, then the old one removed), so ``path``
    holds either all old or all new files.  On any error (KeyboardInterrupt included) the staging folder is
    removed and ``path`` is untouched.  Leftovers of a killed process (its pid no longer running) are cleaned
    up first: its staging folder is removed, and an old folder it had moved aside is put back if ``path`` is
    missing.

    ``whole_folder=False`` (for an output folder the user names directly, which may hold other files): on
    success each entry of the staging folder replaces the entry of the same name in ``path`` by a rename,
    and other entries of ``path`` stay.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for p in _stale(path.parent, f".{path.name}.tmp-"):
        shutil.rmtree(p, ignore_errors=True)
    for p in _stale(path.parent, f".{path.name}.old-"):
        if not path.exists():
            os.replace(p, path)
        else:
            shutil.rmtree(p, ignore_errors=True)
    stage = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    try:
        yield stage
        if not whole_folder and path.is_dir():
            old.mkdir()
            for entry in sorted(stage.iterdir()):
                if (path / entry.name).exists():
                    os.replace(path / entry.name, old / entry.name)
            for entry in sorted(stage.iterdir()):
                os.replace(entry, path / entry.name)
            stage.rmdir()
        else:
            if path.exists():
                os.replace(path, old)
            os.replace(stage, path)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if old.exists():  # only an OS error between the renames gets here: put back what was moved aside
            if not path.exists():
                os.replace(old, path)
            elif not whole_folder:
                for entry in old.iterdir():
                    if not (path / entry.name).exists():
                        os.replace(entry, path / entry.name)
                shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def atomic_write_text(path: PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, then ``os.replace``)."""
    with staged_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


def atomic_write_lines(path: PathLike, lines: Iterable[str]) -> None:
    """Write ``lines`` (without newlines) to ``path``, one per line, atomically.

    A line containing a newline is refused (it would silently change the
    number of examples).
    """
    out = []
    for i, line in enumerate(lines):
        if "\n" in line or "\r" in line:
            raise ValueError(f"{os.fspath(path)}: line {i + 1} to write contains a newline: {line[:80]!r}")
        out.append(line + "\n")
    atomic_write_text(path, "".join(out))


def decode_utf8(path: PathLike, data: bytes) -> str:
    """``data`` (the bytes of ``path``) as text; invalid UTF-8 raises DataError naming the file and line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        lineno = data.count(b"\n", 0, e.start) + 1
        start = data.rfind(b"\n", 0, e.start) + 1
        end = data.find(b"\n", e.start)
        shown = data[start:end if end >= 0 else len(data)].decode("utf-8", errors="replace")
        raise DataError(path, lineno, f"UTF-8 text (byte {e.start - start + 1} of the line is not)", shown) from None


def split_data_lines(path: PathLike, text: str, complete: bool = False) -> list:
    """The lines of ``text`` (the content of ``path``; newlines as open() reads them), empty lines at its end
    dropped.  ``complete``: a non-empty text must end with a newline, else DataError naming the last line (the
    official files all end with one: a last line without it was cut short, e.g. by an interrupted copy)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # as open()'s newlines
    lines = text.split("\n")
    if complete and text and not text.endswith("\n"):
        raise DataError(path, len(lines), "a last line ending with a newline (the file is cut short?)", lines[-1])
    while lines and lines[-1].strip() == "":
        lines.pop()
    return lines


def count_mismatch(paths, counts, what: str = "lines") -> DataError:
    """Two aligned files with different counts: a DataError at the first missing line of the shorter one."""
    (a, b), (n, m) = paths, counts
    short, other = (a, b) if n < m else (b, a)
    return DataError(short, min(n, m) + 1, f"expected as many {what} as {Path(other).name} ({max(n, m)}), "
                                         f"got {min(n, m)}")


def read_data_lines(path: PathLike, what: str = "data file", complete: bool = False) -> list:
    """The lines of a text data file (without newlines); empty lines at its end are dropped.

    A missing file raises MissingFileError (a FileNotFoundError) naming the file and ``what`` it was for; bytes
    that are not UTF-8 raise DataError naming the file and line; with ``complete``, so does a last line without
    its newline (:func:`split_data_lines`).
    """
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{what}: file not found: {path}")
    return split_data_lines(path, decode_utf8(path, path.read_bytes()), complete)


class ArchiveError(UsageError):
    """An archive that cannot be read to its end (corrupt, truncated, not an archive); names the file."""


# what a damaged .tar/.tar.gz raises while it is opened or read
_ARCHIVE_ERRORS = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile)


@contextmanager
def reading_archive(path: PathLike, hint: str = "") -> Iterator[Path]:
    """Wraps the code that opens and reads the archive ``path``: a corrupt or truncated archive raises
    :class:`ArchiveError` naming it (and ``hint``, e.g. that a cached download can be deleted) instead of
    tarfile's ReadError/EOFError naming no file."""
    try:
        yield Path(path)
    except _ARCHIVE_ERRORS as e:
        raise ArchiveError(f"{os.fspath(path)}: corrupt or truncated archive ({type(e).__name__}: {e})"
                           + (f"; {hint}" if hint else "")) from None


def check_archive(path: PathLike) -> None:
    """Read the tar archive ``path`` to its end (every member's data); :class:`ArchiveError` if it is damaged."""
    with reading_archive(path), tarfile.open(path, mode="r|*") as tar:
        for member in tar:
            if member.isfile():
                f = tar.extractfile(member)
                while f.read(1 << 20):
                    pass
