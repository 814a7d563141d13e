"""Refuse a checkpoint that does not belong to the run: the dictionaries it was trained with, and the model it is.

Two silent wrong results this module prevents:

* **Evaluating on other dictionaries.** A checkpoint applied to data whose dictionaries have the same size but
  another order decodes garbage with exit code 0. The model's config records the SHA-256 of its dictionaries
  (`dictionary_sha256`, saved with every checkpoint); `fairseq-generate` / `fairseq-compgen eval` refuse a data
  folder whose dictionaries hash differently.
* **Resuming another model.** `fairseq-train` resumes `SAVE_DIR/checkpoint_last.pt` (or `--restore-file`) whenever
  it exists; with another `--arch` or other model flags whose parameter shapes happen to fit, it loads and trains on
  silently. Before the model is built, the checkpoint's model configuration is compared with the command's, and a
  difference is refused naming the flags. A deliberate start from another model's weights is fairseq's
  `--finetune-from-model PATH` in a new `--save-dir`.

A checkpoint that cannot be read at all (truncated by a crash or a full disk) is named, with the newest readable
checkpoint beside it (the highest stored update), instead of fairseq's zip-archive traceback (a neighbour holding a
disallowed type is named as refused, never recommended); one that holds a type no fairseq checkpoint holds (code that unpickling would run) is
refused by the safe loader (checkpoint_loading.py); one whose weights are NaN/Inf (saved after training diverged) is
refused (tasks/divergence.py).
"""
import argparse
import copy
import hashlib
import os
import sys
from typing import Optional

from fairseq_compgen.checkpoint_loading import UntrustedCheckpointError, load, newest_readable
from fairseq_compgen.errors import UsageError
from fairseq_compgen.tasks.divergence import check_weights

FINGERPRINT = "dictionary_sha256"  # attribute of the model config, saved in every checkpoint


def fingerprint(*dictionaries) -> str:
    """SHA-256 over the symbols of each dictionary in index order (order matters: it is the model's vocabulary)."""
    h = hashlib.sha256()
    for d in dictionaries:
        h.update("\n".join(d.symbols).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def _model_flags(model_cls) -> list:
    parser = argparse.ArgumentParser(add_help=False)
    model_cls.add_args(parser)
    return ["arch"] + [a.dest for a in parser._actions]


def _load(path: str) -> dict:
    """The checkpoint, read with the safe loader (checkpoint_loading.py). One that holds a disallowed type is
    refused as such; one that cannot be read is named with the newest readable checkpoint beside it (by the update
    it stores: checkpoint_loading.newest_readable, which the sweep runner's repair uses too). The neighbours are read
    with the same safe loader, and one refused for its types is never the one recommended."""
    try:
        return load(path)
    except UntrustedCheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 (any failure to read is reported the same way)
        readable, _, refused = newest_readable(os.path.dirname(path) or ".", exclude=path)
        beside = (f"to resume from the newest readable checkpoint beside it: cp {readable} {path}" if readable else
                  f"no readable checkpoint beside it: remove {path} to train from scratch")
        if refused:
            beside += f" (refused as unsafe, not to be used: {', '.join(f'{p} (holds {t})' for p, t in refused)})"
        raise UsageError(f"{path} cannot be read ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                         f"{beside}") from None


def resume_path(cfg) -> Optional[str]:
    """The checkpoint fairseq-train will resume from (fairseq's checkpoint_utils.load_checkpoint rule), if any."""
    save_dir, restore = getattr(cfg, "save_dir", None), getattr(cfg, "restore_file", None) or "checkpoint_last.pt"
    if save_dir is None:
        return None
    if restore != "checkpoint_last.pt":
        return restore if os.path.exists(restore) else None
    path = os.path.join(save_dir, restore)
    if os.path.exists(path):
        return path
    # first launch: fairseq's --continue-once, else nothing to resume (--finetune-from-model on a first launch is a
    # deliberate start from other weights: not checked)
    return getattr(cfg, "continue_once", None)


def _flag(dest: str) -> str:
    return "--arch" if dest == "arch" else "--" + dest.replace("_", "-")


def check_resume(cfg, model_cls, task=None) -> None:
    """Refuse resuming a checkpoint whose model configuration (or dictionaries) differ from `cfg`'s. A model whose
    build_model fills in flags first (`complete_args(args, task)`, e.g. the tagger's size from the data) is compared
    as completed: the checkpoint holds the completed flags."""
    path = resume_path(cfg)
    if path is None:
        return
    complete = getattr(model_cls, "complete_args", None)
    if complete is not None:
        cfg = copy.deepcopy(cfg)  # completed as build_model will; the caller's cfg is left as it is
        complete(cfg, task)
    state = _load(path)
    check_weights(state, path)
    saved = state.get("cfg", {})
    saved = saved.get("model") if hasattr(saved, "get") else None
    if saved is None:
        return
    saved = vars(saved) if isinstance(saved, argparse.Namespace) else dict(saved)
    diffs = []
    for dest in _model_flags(model_cls) + [FINGERPRINT]:
        if dest not in saved:  # a flag newer than the checkpoint: nothing to compare
            continue
        old, new = saved[dest], getattr(cfg, dest, None)
        if old != new:
            diffs.append("the dictionaries differ" if dest == FINGERPRINT else f"{_flag(dest)} {old} -> {new}")
    if diffs:
        raise UsageError(f"{path} holds another model than this command builds ({'; '.join(diffs)}): resume with "
                         f"the checkpoint's flags, or start from its weights deliberately with --finetune-from-model "
                         f"{path} in a new --save-dir")


def model_name(cfg) -> Optional[str]:
    """The registered model (`compgen_transformer`, `compgen_tagger`, ...) of the model config's --arch, or None."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY

    return ARCH_MODEL_NAME_REGISTRY.get(getattr(cfg, "arch", None))


def guard(cfg, fp: str, data: str, from_checkpoint: bool, task=None) -> None:
    """What a task's build_model calls first: the dictionary check, and when training, the model's flag check
    (its check_training_flags) and the resume check."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    check_dictionaries(cfg, fp, data, from_checkpoint)
    if not from_checkpoint and getattr(cfg, "arch", None) in ARCH_MODEL_REGISTRY:
        model_cls = ARCH_MODEL_REGISTRY[cfg.arch]
        if hasattr(model_cls, "check_training_flags"):  # flags that would change nothing (models/*.py)
            model_cls.check_training_flags(cfg)
        check_ignored_flags(model_cls, cfg, sys.argv[1:])  # fairseq-train's own command line
        check_resume(cfg, model_cls, task)


def check_ignored_flags(model_cls, cfg, words) -> None:
    """Refuse a flag of the command line `words` that the model's settings never read (its ignored_flags, e.g.
    --attention-dropout with linear attention): given there, it was meant to change something. The parsed config
    alone cannot tell, since the presets set every flag's default. `fairseq-compgen train` checks its own options
    before it writes anything (pipelines/train.py); `guard` checks fairseq-train's (sys.argv) when it builds a model
    to train."""
    ignored = model_cls.ignored_flags(cfg) if hasattr(model_cls, "ignored_flags") else {}
    for flag in [w.split("=")[0] for w in words if w.split("=")[0] in ignored]:
        raise UsageError(f"{flag} changes nothing with --arch {cfg.arch}: {ignored[flag]}")


def check_dictionaries(cfg, fp: str, data: str, from_checkpoint: bool) -> None:
    """Record `fp` in the model config; when building from a checkpoint, refuse dictionaries that differ."""
    saved = getattr(cfg, FINGERPRINT, None)
    if from_checkpoint and saved is not None and saved != fp:
        raise UsageError(f"the checkpoint was trained with other dictionaries than {data}'s (SHA-256 {saved[:12]} "
                         f"vs {fp[:12]}: other words or the same words in another order), so its outputs would be "
                         f"wrong: evaluate on the data folder it was trained on")
    setattr(cfg, FINGERPRINT, fp)
