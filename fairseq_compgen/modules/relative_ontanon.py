"""Old import path (before issue 24); the module is modules/positions/relative_ontanon.py."""
from fairseq_compgen.modules.positions.relative_ontanon import *  # noqa: F401,F403
