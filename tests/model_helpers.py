"""Test shorthands over fairseq_compgen.models.standalone."""
import fairseq_compgen  # noqa: F401  (registers models)
from fairseq_compgen.models.standalone import build_model as build  # noqa: F401
from fairseq_compgen.models.standalone import compgen_archs, make_dictionary  # noqa: F401
