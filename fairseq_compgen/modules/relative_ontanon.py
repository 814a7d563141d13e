"""Old import path (before the positions wing); the module is modules/positions/relative_ontanon.py."""
from fairseq_compgen.modules.positions.relative_ontanon import *  # noqa: F401,F403
