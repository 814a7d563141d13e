"""Downloading official data files: to a temporary name, then renamed into place.

Shared by every `fairseq-compgen prep` dataset (SCAN, COGS, CFQ, PCFG SET, Mathematics).
Files go to a cache folder, ``$FAIRSEQ_COMPGEN_CACHE/<dataset>`` or
``~/.cache/fairseq_compgen/<dataset>``; a file already there is reused.  A downloaded archive
(``.tgz``/``.tar.gz``/``.tar``) is read to its end before it enters the cache, and every download's
SHA-256 is recorded beside it (``<name>.sha256``) and checked whenever the cached file is reused, so a
corrupt download is never reused silently: the error says to delete it.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from fairseq_compgen.data.io import ArchiveError, atomic_write_text, check_archive
from fairseq_compgen.errors import UsageError

ARCHIVE_SUFFIXES = (".tgz", ".tar.gz", ".tar")


class DownloadError(UsageError, RuntimeError):
    """A download failed, or a cached download is corrupt; the message says what to do."""


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _record(dest: Path) -> Path:
    return dest.with_name(dest.name + ".sha256")


def redownload_hint(path: Path) -> str:
    """For an error about ``path``: how to get a fresh copy if it is a cached download (else "")."""
    path = Path(path)
    root = default_cache_dir("x").parent
    if _record(path).is_file() or root.resolve() in path.resolve().parents:
        return f"it is a cached download: delete it ({path}) and rerun to download it again"
    return ""


def default_cache_dir(dataset: str) -> Path:
    """``$FAIRSEQ_COMPGEN_CACHE/<dataset>`` or ``~/.cache/fairseq_compgen/<dataset>``."""
    root = os.environ.get("FAIRSEQ_COMPGEN_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "fairseq_compgen"
    return base / dataset


def download_url(
    url: str,
    dest: Path,
    hint: str = "",
    timeout: float = 60.0,
    progress: bool = False,
    chunk_size: int = 1 << 16,
) -> Path:
    """Download ``url`` to ``dest`` (``dest.tmp-<pid>`` first, renamed at the end).

    An existing ``dest`` is reused without downloading, after checking it against the SHA-256 recorded
    when it was downloaded.  An archive is read to its end before it is renamed into place.  On failure the
    temporary file is removed and :class:`DownloadError` (a RuntimeError) is raised, ending with
    ``hint`` (say which ``--<name>-dir`` option reads a local copy).
    ``progress`` prints the downloaded size to stderr every few seconds.
    """
    dest = Path(dest)
    record = _record(dest)
    if dest.is_file():
        recorded = record.read_text(encoding="utf-8", errors="replace").split()[:1] if record.is_file() else None
        if recorded == []:  # an empty record (a disk that filled up): the SHA-256 is unknown
            raise DownloadError(f"{record}: expected the SHA-256 recorded when {dest.name} was downloaded, found an "
                                f"empty file; delete both and rerun to download it again")
        if recorded and _sha256(dest) != recorded[0]:
            raise DownloadError(f"{dest}: the cached download is corrupt (its SHA-256 differs from the one recorded "
                                f"in {record.name} when it was downloaded); delete both and rerun to download it again")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
    try:
        # urllib.request.urlopen is looked up at call time (tests replace it).
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as f:
            total = 0
            last = time.monotonic()
            while True:
                chunk = resp.read(chunk_size)
                if not chunk:
                    break
                f.write(chunk)
                total += len(chunk)
                if progress and time.monotonic() - last > 5:
                    last = time.monotonic()
                    print(f"  downloading {url}: {total / 1e6:.0f} MB", file=sys.stderr, flush=True)
        if dest.name.endswith(ARCHIVE_SUFFIXES):
            try:
                check_archive(tmp)
            except ArchiveError as e:
                raise DownloadError(f"the download of {url} is not a readable archive ({e}); nothing was cached"
                                    + (f"; {hint}" if hint else "")) from None
        atomic_write_text(record, f"{_sha256(tmp)}  {dest.name}\n")
        os.replace(tmp, dest)
    except (urllib.error.URLError, OSError) as e:
        raise DownloadError(f"could not download {url} ({e}){'; ' + hint if hint else ''}") from e
    finally:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
    return dest


def fetch(url: str, dataset: str, rel_path: str, cache_dir: Optional[Path] = None, hint: str = "", **kw) -> Path:
    """Download ``url`` into ``cache_dir/rel_path`` (default cache: :func:`default_cache_dir`)."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir(dataset)
    return download_url(url, cache / rel_path, hint=hint, **kw)
