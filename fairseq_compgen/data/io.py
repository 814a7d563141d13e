"""Small I/O helpers shared by the data code: atomic writes and data errors.

Used by the SCAN generator/reader (Lake & Baroni 2018, "Generalization without
systematicity", ICML) and the exact-match scorer.
"""

from __future__ import annotations

import gzip
import json
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


GZIP_MAGIC = b"\x1f\x8b"


def read_text_lines(path: PathLike, expected: str) -> list:
    """The lines (with their ends) of the UTF-8 text file `path` ("-": standard input), read decompressed if it is
    gzip (as a run's eval/SUBSET.outputs.gz); a binary file (a NUL byte, or bytes that are not UTF-8) or a damaged
    gzip file is a DataError naming the file, the first bad line and `expected` (what the file should hold)."""
    if path == "-":
        import sys

        path, data = "<stdin>", sys.stdin.buffer.read()
    else:
        path = Path(path)
        data = path.read_bytes()
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise DataError(path, 1, f"a damaged gzip file ({e}): expected {expected}") from None
    nul = data.find(b"\0")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = e.start
    else:
        bad = nul if nul >= 0 else None
    if bad is not None:
        raise DataError(path, data.count(b"\n", 0, bad) + 1, f"a binary file, not text: expected {expected}")
    return text.splitlines(keepends=True)


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


def pid_alive(pid: int) -> bool:
    """Whether process `pid` is running (also when it is another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def stale_entries(folder: Path, prefix: str) -> list:
    """Entries ``<prefix><pid>`` of ``folder`` whose process is no longer running."""
    out = []
    for p in folder.glob(prefix + "*"):
        pid = p.name[len(prefix):]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            out.append(p)
    return out


def _refuse_file(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path} is a file, not a folder: expected a folder to write into (or nothing there); "
                         f"move the file away or choose another output")


def _begin(path: Path, restore) -> Path:
    """Before staging into `path`: refuse a plain file there, make its parent, remove a killed process's staging
    folders and hand each of its moved-aside folders to `restore(old, path)`."""
    path = Path(os.path.abspath(path))  # "." or "out/" names its folder: staging goes beside it, by its name
    if not path.name:
        raise UsageError(f"{path}: the root folder cannot be an output folder: expected a folder inside it")
    _refuse_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for p in stale_entries(path.parent, f".{path.name}.tmp-"):
        shutil.rmtree(p, ignore_errors=True)
    for p in stale_entries(path.parent, f".{path.name}.old-"):
        restore(p, path)
    return path


def _put_back_whole(old: Path, path: Path) -> None:
    """A folder moved aside whole goes back if `path` is missing, else it is stale."""
    if not path.exists():
        os.replace(old, path)
    else:
        shutil.rmtree(old, ignore_errors=True)


@contextmanager
def staged_dir(path: PathLike) -> Iterator[Path]:
    """Yields an empty staging folder ``.<name>.tmp-<pid>`` beside the folder ``path``, in which a folder that is
    only ever made whole (an extracted archive, a cache) is built.

    On success the staging folder takes the place of ``path`` by renames only (the old folder is moved to
    ``.<name>.old-<pid>``, the staging folder renamed to ``path``, then the old one removed), so ``path``
    holds either all old or all new files.  On any error (KeyboardInterrupt included) the staging folder is
    removed and ``path`` is untouched.  Leftovers of a killed process (its pid no longer running) are cleaned
    up first: its staging folder is removed, and an old folder it had moved aside is put back if ``path`` is
    missing.  A plain file at ``path`` is refused (UsageError), not moved aside.  An output folder a user names,
    which may hold other files, is :func:`staged_files`' instead.
    """
    path = _begin(path, _put_back_whole)
    stage = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    try:
        yield stage
        if path.exists():
            os.replace(path, old)
        os.replace(stage, path)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if old.exists() and not path.exists():  # only an OS error between the renames gets here
            os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


MANIFEST = ".prep-files.json"  # in a folder written by staged_files: writer -> the files (relative paths) it wrote there


def _files(folder: Path) -> list:
    """Every file (or link) under ``folder``, as sorted paths relative to it."""
    out = []
    for root, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            out.append(os.path.relpath(os.path.join(root, name), folder))
    return sorted(out)


def written_files(path: PathLike) -> dict:
    """Writer -> the files (relative paths) :func:`staged_files` last wrote for it into the folder ``path`` ({} if
    none). A manifest of an earlier version (``{"files": [...]}``, no writers) reads as ``{None: files}``."""
    manifest = Path(path) / MANIFEST
    if not manifest.is_file():
        return {}
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        by = {None: data["files"]} if "files" in data else dict(data["by"])
        if not all(isinstance(names, list) for names in by.values()):
            raise TypeError
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UsageError(f"{manifest}: expected the JSON object of the files each prep wrote "
                         f"({{\"by\": {{\"prep NAME\": [...]}}}}); delete it to treat every file there as the "
                         f"user's") from None
    return {writer: [n for n in names if isinstance(n, str) and not os.path.isabs(n) and ".." not in Path(n).parts]
            for writer, names in by.items()}


def _restore_old(old: Path, path: Path) -> None:
    """Put the files of a moved-aside ``old`` folder back where ``path`` lacks them; then remove ``old``."""
    for rel in _files(old):
        if not os.path.lexists(path / rel):
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(old / rel, path / rel)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def staged_files(path: PathLike, writer: str) -> Iterator[Path]:
    """Like :func:`staged_dir` (an empty staging folder beside ``path`` is yielded; nothing of ``path`` changes
    unless the block succeeds), but for an output folder that may hold what others made: a prep rerun must not
    delete ``fairseq-compgen prep russin``'s ``russin/``, another prep's outputs or a file of the user.

    ``writer`` names the command that writes (``"prep cogs"``). On success each file of the staging folder
    (recursively: ``bin/dict.src.txt``) replaces the file of the same relative path in ``path`` by a rename, and
    the files the same writer wrote there the last time (``path/.prep-files.json``, which lists each writer's
    files) that this run did not write are removed (its stale outputs). Every other file of ``path`` stays. A file
    another writer wrote is never replaced: writing one is refused (UsageError) before anything is moved, as two
    preps in one folder would mix their data (``prep cogs`` and ``prep cogs_tagging`` both write ``train.src``).
    A file that no writer wrote (not in the manifest: the user's, or a folder prepared before manifests) is
    never replaced: writing one is refused too. The files of a manifest of an earlier version, which names no
    writer, are replaced when rewritten and otherwise kept. The replaced files are first moved to ``.<name>.old-<pid>``; an error
    while renaming puts them back. A plain file at ``path``, or a file where a folder of the output must go (or
    the reverse), is refused (UsageError) before anything is moved.
    """
    path = _begin(path, _restore_old)
    stage = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    moved_in: list = []
    manifest_tmp = path / f"{MANIFEST}.tmp-{os.getpid()}"
    try:
        yield stage
        new = [rel for rel in _files(stage) if rel != MANIFEST]
        by = written_files(path)
        listed = {rel for names in by.values() for rel in names}  # every file a prep wrote here
        stale = [rel for rel in by.pop(writer, []) if rel not in set(new)
                 and os.path.lexists(path / rel) and not (path / rel).is_dir()]
        by.pop(None, None)  # an earlier version's list: its files are the user's from now on
        for other, names in by.items():
            clash = sorted(rel for rel in set(names) & set(new) if os.path.lexists(path / rel))
            if clash:
                raise UsageError(f"{path / clash[0]} was written by `{other}`; `{writer}` would replace it and mix "
                                 f"their data: write into another folder (or delete {path / clash[0]} first)")
            by[other] = [rel for rel in names if rel not in set(new)]  # a file deleted since is no longer theirs
        unlisted = sorted(rel for rel in new if rel not in listed and os.path.lexists(path / rel)
                          and (os.path.islink(path / rel) or not os.path.isdir(path / rel)))  # a folder: below
        if unlisted:  # the user's (or a prep's from before the manifest existed): never replaced unasked
            more = f" (and {len(unlisted) - 1} more)" if len(unlisted) > 1 else ""
            raise UsageError(f"{path / unlisted[0]}{more} is not a file that a prep wrote ({path / MANIFEST} does not "
                             f"list it); `{writer}` would replace it: move it away or write into another folder")
        for rel in new:
            for parent in list(Path(rel).parents)[:-1]:
                if os.path.lexists(path / parent) and not (path / parent).is_dir():
                    raise UsageError(f"{path / parent} is a file, but the output needs a folder there (for {rel}): "
                                     f"move it away")
            if (path / rel).is_dir() and not (path / rel).is_symlink():
                raise UsageError(f"{path / rel} is a folder, but the output writes a file there: move it away")
        path.mkdir(exist_ok=True)
        for rel in new + stale:
            if os.path.lexists(path / rel):
                (old / rel).parent.mkdir(parents=True, exist_ok=True)
                os.replace(path / rel, old / rel)
        for rel in new:
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / rel, path / rel)
            moved_in.append(rel)
        by[writer] = new
        manifest_tmp.write_text(json.dumps({"by": by}, indent=0, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(manifest_tmp, path / MANIFEST)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if os.path.lexists(manifest_tmp):
            os.unlink(manifest_tmp)
        for rel in moved_in:  # the new files this run put in place go, the old ones come back
            try:
                os.unlink(path / rel)
            except FileNotFoundError:
                pass
        if old.exists():
            _restore_old(old, path)
        raise
    for rel in stale:  # folders left empty by removed stale outputs
        for parent in list(Path(rel).parents)[:-1]:
            try:
                (path / parent).rmdir()
            except OSError:
                break
    shutil.rmtree(stage, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)


def atomic_write_text(path: PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, then ``os.replace``)."""
    with staged_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


def gzip_text(text: str) -> bytes:
    """``text`` as UTF-8, gzip-compressed, with no time, file name or OS in the header (GzipFile's own header, not
    zlib's, whose OS byte depends on the platform), so that the same text gives the same bytes wherever the same
    zlib compresses it, and a file rewritten unchanged is unchanged for git."""
    import io as _io

    buffer = _io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as f:
        f.write(text.encode("utf-8"))
    return buffer.getvalue()


def atomic_write_gzip_text(path: PathLike, text: str) -> None:
    """Write ``gzip_text(text)`` to ``path`` atomically."""
    with staged_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(gzip_text(text))
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
    """``data`` (the bytes of ``path``) as text, without a byte-order mark at its start (an editor's mark of the
    encoding, not text: it became part of the first word, a token of its own in the dictionary); invalid UTF-8
    raises DataError naming the file and line."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # no newline in it: line numbers stay those of the file
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
