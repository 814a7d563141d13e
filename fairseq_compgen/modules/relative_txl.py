"""Old import path (before the positions wing); the module is modules/positions/relative_txl.py."""
from fairseq_compgen.modules.positions.relative_txl import *  # noqa: F401,F403
