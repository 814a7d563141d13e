"""Build registered models without data on disk: a dictionary of N words and a stand-in task."""
import argparse

from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

import fairseq_compgen  # noqa: F401  (registers models)


def make_dict(n_words: int) -> Dictionary:
    d = Dictionary()
    for i in range(n_words):
        d.add_symbol(f"w{i}")
    return d


class StandInTask:
    def __init__(self, src: Dictionary, tgt: Dictionary):
        self.source_dictionary, self.target_dictionary = src, tgt


def build(arch: str, src_words: int = 11, tgt_words: int = 3, **overrides):
    """Model of `arch` with dictionaries of 4 specials + src_words / tgt_words words."""
    args = argparse.Namespace(arch=arch, **overrides)
    ARCH_CONFIG_REGISTRY[arch](args)
    model_cls = ARCH_MODEL_REGISTRY[arch]
    return model_cls.build_model(args, StandInTask(make_dict(src_words), make_dict(tgt_words)))


def compgen_archs():
    return sorted(a for a, cls in ARCH_MODEL_REGISTRY.items() if cls.__module__.startswith("fairseq_compgen"))
