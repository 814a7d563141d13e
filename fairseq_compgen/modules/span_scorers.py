"""Old import path (before the positions wing); the module is modules/positions/span.py."""
from fairseq_compgen.modules.positions.span import *  # noqa: F401,F403
