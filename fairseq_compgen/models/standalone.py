"""Build any registered architecture without data on disk (tests, benchmarks, notebooks)."""
import argparse
from typing import Optional

from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY, FairseqEncoderDecoderModel


def make_dictionary(n_words: int) -> Dictionary:
    """A fairseq dictionary: its 4 special symbols plus words w0 .. w{n-1}."""
    d = Dictionary()
    for i in range(n_words):
        d.add_symbol(f"w{i}")
    return d


class StandInTask:
    """What `build_model` needs of a task: its two dictionaries."""

    def __init__(self, src: Dictionary, tgt: Dictionary):
        self.source_dictionary, self.target_dictionary = src, tgt


def build_model(arch: str, src_words: int = 11, tgt_words: int = 3, joined: Optional[bool] = None, **overrides):
    """A model of any registered `arch` (ours or fairseq's), dictionaries of 4 specials + n words each;
    `overrides` are model flags as attribute names (e.g. encoder_layers=2). `joined`: one dictionary of
    `src_words` words for both sides; by default only when the model needs one (the copy decoder)."""
    import fairseq_compgen

    fairseq_compgen.register()
    args = argparse.Namespace(arch=arch, **overrides)
    ARCH_CONFIG_REGISTRY[arch](args)
    if joined is None:
        joined = bool(getattr(args, "copy_decoder", False))
    src = make_dictionary(src_words)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, StandInTask(src, src if joined else make_dictionary(tgt_words)))


def compgen_archs():
    """Every encoder-decoder architecture registered by this package, sorted."""
    import fairseq_compgen

    fairseq_compgen.register()
    return sorted(a for a, cls in ARCH_MODEL_REGISTRY.items()  # encoder-only taggers (tagger_archs) are not here
                  if cls.__module__.startswith("fairseq_compgen") and issubclass(cls, FairseqEncoderDecoderModel))


def tagger_archs():
    """Every architecture of the encoder-only `compgen_tagger` (COGS as sequence tagging), sorted."""
    from fairseq_compgen.models.tagger import CompgenTaggerModel

    return sorted(a for a, cls in ARCH_MODEL_REGISTRY.items() if cls is CompgenTaggerModel)
