"""Downloading official data files: to a temporary name, then renamed into place.

Shared by every data-prep script (SCAN, COGS, CFQ, PCFG SET, Mathematics).
Files go to a cache folder, ``$FAIRSEQ_COMPGEN_CACHE/<dataset>`` or
``~/.cache/fairseq_compgen/<dataset>``; a file already there is reused.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional


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

    An existing ``dest`` is reused without downloading.  On failure the
    temporary file is removed and RuntimeError is raised, ending with
    ``hint`` (say which ``--<name>-dir`` option reads a local copy).
    ``progress`` prints the downloaded size to stderr every few seconds.
    """
    dest = Path(dest)
    if dest.is_file():
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
        os.replace(tmp, dest)
    except (urllib.error.URLError, OSError) as e:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise RuntimeError(f"could not download {url} ({e}){'; ' + hint if hint else ''}") from e
    return dest


def fetch(url: str, dataset: str, rel_path: str, cache_dir: Optional[Path] = None, hint: str = "", **kw) -> Path:
    """Download ``url`` into ``cache_dir/rel_path`` (default cache: :func:`default_cache_dir`)."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir(dataset)
    return download_url(url, cache / rel_path, hint=hint, **kw)
