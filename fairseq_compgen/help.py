"""`fairseq-compgen help [ARCH]`: the flags of our models and task, with the defaults a preset sets.

fairseq-train's own `--help` stops before it adds model- and task-specific flags (it prints help during its
first parse), so this command shows them: every flag of `compgen_transformer` (or of ARCH's model) with its
help text, the preset's default values, and the flags of the `compgen` task (of `cogs_tagging` for the
encoder-only `compgen_tagger` archs).

    fairseq-compgen help                      # the registered architectures and position encodings
    fairseq-compgen help rel_uni_transformer  # flags and defaults of one preset
    fairseq-compgen help --user-dir PLUGIN    # the same with a plugin folder's own encodings and models
"""
import argparse
import sys

import fairseq_compgen
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
from fairseq.dataclass.utils import gen_parser_from_dataclass

from fairseq_compgen.errors import UsageError
from fairseq_compgen.models.standalone import compgen_archs, tagger_archs
from fairseq_compgen.models.tagger import CompgenTaggerModel
from fairseq_compgen.modules.positions import registry as position_registry
from fairseq_compgen.tasks.cogs_tagging import CogsTaggingConfig
from fairseq_compgen.tasks.compgen import CompgenConfig

fairseq_compgen.register()


def main(argv=None):
    plugin = argparse.ArgumentParser(prog="fairseq-compgen help", add_help=False)
    plugin.add_argument("--user-dir", metavar="PLUGIN")  # anywhere, either form: imported before anything is listed
    known, argv = plugin.parse_known_args(sys.argv[1:] if argv is None else argv)
    if known.user_dir:
        fairseq_compgen.import_user_dir(known.user_dir)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        print("architectures:", " ".join(compgen_archs()))
        print("\nencoder-only taggers (--task cogs_tagging):", " ".join(tagger_archs()))
        print("\nposition encodings (--absolute-positions: input; --self-attn-pos: encoder-self, decoder-self; "
              "--cross-attn-pos: cross):")
        print(position_registry.describe())
        return
    arch = argv[0]
    if arch not in ARCH_MODEL_REGISTRY:
        raise UsageError(f"fairseq-compgen help: unknown architecture {arch!r}: expected a registered one "
                         f"(fairseq-compgen help lists them)")
    model_parser = argparse.ArgumentParser(prog=f"--arch {arch}", add_help=False,
                                           argument_default=argparse.SUPPRESS)
    ARCH_MODEL_REGISTRY[arch].add_args(model_parser)
    defaults = argparse.Namespace()
    ARCH_CONFIG_REGISTRY[arch](defaults)
    print(model_parser.format_help())
    print(f"defaults set by --arch {arch}:")
    for k, v in sorted(vars(defaults).items()):
        print(f"  --{k.replace('_', '-')} {v}")
    tagger = ARCH_MODEL_REGISTRY[arch] is CompgenTaggerModel
    task_parser = argparse.ArgumentParser(prog="--task " + ("cogs_tagging" if tagger else "compgen"), add_help=False)
    gen_parser_from_dataclass(task_parser, CogsTaggingConfig() if tagger else CompgenConfig())
    print()
    print(task_parser.format_help())


if __name__ == "__main__":
    main()
