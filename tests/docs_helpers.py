"""The documentation the tests check: the README (the front door) and the topic pages under docs/."""
from __future__ import annotations

from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parents[1]


def doc_files() -> List[Path]:
    """README.md, then docs/*.md in name order."""
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
