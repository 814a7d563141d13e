"""Test shorthands over fairseq_compgen.models.standalone, and a loader for the `fairseq-compgen prep` modules."""
import importlib.util

import fairseq_compgen
from fairseq_compgen.models.standalone import build_model as build  # noqa: F401
from fairseq_compgen.models.standalone import compgen_archs, make_dictionary  # noqa: F401

fairseq_compgen.register()


def data_prep_script(name: str):
    """fairseq_compgen.prep.<name> (`fairseq-compgen prep <name>`) as a fresh module: each call loads a new copy."""
    spec = importlib.util.find_spec(f"fairseq_compgen.prep.{name}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
