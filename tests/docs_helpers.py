"""The documentation the tests check: the README (the front door) and the topic pages under docs/."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parents[1]


def doc_files() -> List[Path]:
    """README.md, then docs/*.md in name order."""
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))


def doc_text() -> str:
    """Every documentation file's text, one after another."""
    return "\n".join(p.read_text(encoding="utf-8") for p in doc_files())


def code_blocks(text: str, lang: str = "bash") -> List[str]:
    """The body of every fenced ```<lang> block of a documentation file's text."""
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)
