"""Test shorthands over fairseq_compgen.models.standalone, and a loader for the data-prep scripts."""
import importlib.util
from pathlib import Path

import fairseq_compgen
from fairseq_compgen.models.standalone import build_model as build  # noqa: F401
from fairseq_compgen.models.standalone import compgen_archs, make_dictionary  # noqa: F401

fairseq_compgen.register()


def data_prep_script(name: str):
    """data-prep/<name>.py as a fresh module (the scripts are not a package); each call loads a new copy."""
    path = Path(__file__).resolve().parents[1] / "data-prep" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_data_prep", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
