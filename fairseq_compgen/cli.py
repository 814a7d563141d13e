"""`fairseq-compgen`: the toolkit's one command. Each subcommand runs Python in this process; fairseq's own
commands (`fairseq-train --user-dir fairseq_compgen ...`, `fairseq-generate`) work beside it as always.

Why not plain `compgen`: bash has a builtin of that name (its completion generator), which a shell runs before
any program on PATH, so `compgen train ...` in bash would silently do nothing and exit 0.

    fairseq-compgen prep DATASET ...         prepare a dataset (fairseq-compgen prep --help lists them)
    fairseq-compgen recipes [NAME]           list the training recipes, or show one with its options
    fairseq-compgen train ...                fairseq-train with a recipe (--dry-run prints the command)
    fairseq-compgen eval CHECKPOINT DATA     greedy decoding + exact match (or BLEU / COMP) per subset, as JSON
    fairseq-compgen sweep SWEEP ...          configurations x seeds x datasets, locally or on Slurm (submitit)
    fairseq-compgen aggregate OUT ...        a sweep's tables (mean ± std over seeds) and learning curves
    fairseq-compgen score KIND LOG ...       score a fairseq-generate output: exact_match | bleu | comp | ...
    fairseq-compgen help [ARCH]              the registered archs, or one arch's flags with its preset's defaults
    fairseq-compgen plot t5-biases CKPT ...  learned T5 biases of a checkpoint (Chaabouni et al., Figure 1)

`fairseq-compgen SUBCOMMAND --help` explains each. Nothing here imports fairseq or torch until a subcommand needs
it, so `fairseq-compgen --help` answers at once.
"""
from __future__ import annotations

import importlib
import os
import signal
import sys
import warnings
from typing import Optional, Sequence

# subcommand -> (module, function); imported only when called
COMMANDS = {
    "prep": ("fairseq_compgen.prep", "main"),
    "recipes": ("fairseq_compgen.cli", "recipes_main"),
    "train": ("fairseq_compgen.pipelines.train", "main"),
    "eval": ("fairseq_compgen.pipelines.evaluate", "main"),
    "sweep": ("fairseq_compgen.pipelines.sweep", "main"),
    "aggregate": ("fairseq_compgen.pipelines.aggregate", "main"),
    "score": ("fairseq_compgen.cli", "score_main"),
    "help": ("fairseq_compgen.help", "main"),
    "plot": ("fairseq_compgen.cli", "plot_main"),
}


def recipes_main(argv: Sequence[str]) -> int:
    """fairseq-compgen recipes [NAME]: the recipes, one line each; with NAME, its paper, notes and options."""
    from fairseq_compgen import recipes

    if argv and argv[0] in ("-h", "--help"):
        print(recipes_main.__doc__)
        return 0
    if not argv:
        for name in recipes.names():
            r = recipes.get(name)
            print(f"{name:22s} {r.paper}" + (f"  [arch {r.arch}]" if r.arch else ""))
        return 0
    r = recipes.get(argv[0])
    print(f"{r.name}: {r.paper}")
    if r.note:
        print(f"  {r.note}")
    if r.arch:
        print(f"  arch it was written for: {r.arch}")
    print(f"  fairseq-train options ({recipes.FILE}):")
    for k, v in r.options.items():
        if isinstance(v, dict):
            base, d, warmup = v["noam"]
            v = f"noam peak {recipes.noam_peak(base, d, warmup)!r} = {base:g} / sqrt({d:g} * {warmup:g})"
        print(f"    --{k} {'' if v is True else v}".rstrip())
    print(f"  the full command: fairseq-compgen train --recipe {r.name} ARCH DATA SAVE --dry-run")
    return 0


def score_main(argv: Sequence[str]) -> int:
    """fairseq-compgen score SCORER GENERATE_LOG [...]: the scorers of fairseq_compgen.scoring (one file each);
    `fairseq-compgen score SCORER --help` shows a scorer's options."""
    from fairseq_compgen import scoring

    if not argv or argv[0] in ("-h", "--help"):
        print(score_main.__doc__)
        for name in scoring.names():
            s = scoring.get(name)
            print(f"  {name:12s} {s.help} ({s.paper}); result key {s.key!r}")
        return 0
    scoring.get(argv[0], "fairseq-compgen score").main(list(argv[1:]))
    return 0


def plot_main(argv: Sequence[str]) -> int:
    """fairseq-compgen plot t5-biases CHECKPOINT [-o OUT.png]: the learned T5 biases after a softmax over distances, per
    head and layer (Chaabouni et al., Figure 1). Learning curves: fairseq-compgen aggregate OUT writes OUT/plots/."""
    if argv[:1] != ["t5-biases"]:
        print(plot_main.__doc__)
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    from fairseq_compgen.pipelines import t5_biases

    return t5_biases.main(list(argv[1:])) or 0


# Hydra's deprecation warnings that fairseq's own use of Hydra raises at every fairseq-train and fairseq-generate (about
# twenty lines before the first log line; nothing a user of fairseq can change), and torch's notice that fairseq's
# data loaders ask for pinned memory on a machine without an accelerator (every CPU run): left out of this command's
# output, unless the user chose warning filters (python -W, PYTHONWARNINGS). Matched from the start of each message.
HYDRA_DEPRECATIONS = (
    r"hydra\.experimental\.\w+\(\) is no longer experimental",
    r"\nThe version_base parameter is not specified",
    r"In '[^']*': Usage of deprecated keyword in package header",
    r"\n'[^']*' is validated against ConfigStore schema with the same name",
    r"\nThe strict flag in the compose API is deprecated",
)
TORCH_CPU_NOTICES = (r"'pin_memory' argument is set as true but no accelerator is found",)


def quiet_known_warnings() -> None:
    """Leave HYDRA_DEPRECATIONS and TORCH_CPU_NOTICES out of this process's output, unless the user set warning filters
    (-W, PYTHONWARNINGS). Called by every `fairseq-compgen` command and by the torchrun workers of `fairseq-compgen
    train --nprocs`."""
    if not sys.warnoptions:
        for pattern in HYDRA_DEPRECATIONS + TORCH_CPU_NOTICES:
            warnings.filterwarnings("ignore", message=pattern, category=UserWarning)


# fairseq's console scripts' log format (fairseq_cli/train.py and generate.py), which the log readers expect
FAIRSEQ_LOG_FORMAT = dict(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", datefmt="%Y-%m-%d %H:%M:%S")


def fairseq_logging(default_level: str, stream) -> None:
    """Log as fairseq's console scripts do, to `stream`, at LOGLEVEL (fairseq's variable) or `default_level`. fairseq
    is imported first: importing it runs `logging.basicConfig(level=DEBUG)` (fairseq/models/wav2vec/
    wav2vec2_classification.py), after which every fairseq message went to stderr as `INFO:name:message`."""
    import importlib
    import logging

    importlib.import_module("fairseq")  # its logging configuration first, replaced below

    logging.basicConfig(**FAIRSEQ_LOG_FORMAT, level=os.environ.get("LOGLEVEL", default_level).upper(), stream=stream,
                        force=True)


def _terminated(signum, frame):
    raise KeyboardInterrupt


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] in ("-V", "--version"):
        from fairseq_compgen import __version__
        print(f"fairseq-compgen {__version__}")
        return 0
    if argv[0] not in COMMANDS:
        print(f"fairseq-compgen: error: unknown subcommand {argv[0]!r} (known: {', '.join(COMMANDS)}; "
              f"fairseq-compgen --help)", file=sys.stderr)
        return 2
    # OpenMP threads wait passively: with the default busy-waiting, a 2-thread CPU run that shares the cores with
    # another process measured 1.6-8x slower per step (docs/results.md, "Speed on CPU"). Read once, when torch loads
    # libgomp, so it is set before any subcommand imports torch; `OMP_WAIT_POLICY=ACTIVE fairseq-compgen ...` sets
    # it back.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    quiet_known_warnings()
    module, function = COMMANDS[argv[0]]
    from fairseq_compgen.errors import Interrupted, exit_before_finalizing

    if argv[0] in ("prep", "sweep") and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        # `kill` stops a prep (also a `sweep --prep`'s) as Ctrl-C does: its staging folder removed and its
        # fairseq-preprocess child stopped (subprocess.run kills the child on an exception); by default the child
        # went on writing, orphaned. A sweep's runs have their own handler (pipelines/sweep.py, run_sweep)
        signal.signal(signal.SIGTERM, _terminated)

    try:
        rc = getattr(importlib.import_module(module), function)(argv[1:])
    except BrokenPipeError:
        # the reader went away (`fairseq-compgen prep --help | head -1`): stop quietly as other Unix tools do; stdout
        # goes to /dev/null so that the interpreter's last flush does not raise again (Python's signal docs)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (KeyboardInterrupt, Interrupted) as e:  # Ctrl-C: one line, what was kept (the command says) and 130
        what = str(e) if isinstance(e, Interrupted) else "rerun the same command to resume"
        print(f"fairseq_compgen: interrupted: {what}", file=sys.stderr)
        exit_before_finalizing(130)
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
