"""The `compgen` command (work in progress: subcommands are being added)."""
from __future__ import annotations

import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    raise SystemExit("compgen: not yet implemented")


if __name__ == "__main__":
    sys.exit(main())
