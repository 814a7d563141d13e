"""Load checkpoints without running code in them: the one place where this package reads a checkpoint.

A `.pt` file is a pickle, and unpickling with `torch.load(weights_only=False)` runs whatever the file says (a
checkpoint from elsewhere could call `os.system`). Every checkpoint this package or fairseq reads on our behalf
goes through :func:`load`, which uses torch's weights-only unpickler with an explicit allowlist (:func:`allowlist`)
of the few non-tensor types that fairseq's checkpoints hold. Anything else is refused with one line naming the
file and the type (:class:`UntrustedCheckpointError`, a UsageError). A trusted legacy file that holds another
type loads only after an explicit opt-in: ``FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS=1`` (then torch's full unpickler).

The callers:

* fairseq's own loader, `fairseq.checkpoint_utils.load_checkpoint_to_cpu` (fairseq-generate --path, fairseq-train
  resuming --save-dir/--restore-file/--finetune-from-model, `fairseq-compgen eval`), and its
  `load_ema_from_checkpoint` (--ema-seed-model) are wrapped by :func:`wrap_fairseq_loader`: during the call their
  `torch.load` is :func:`load`; reading the config and upgrading old checkpoints stay fairseq's.
* tasks/checkpoint_guard.py (the resume checks), pipelines/train.py (is the run finished?), pipelines/t5_biases.py.

torch's own environment variables are left as the user set them; this module never sets any. Because :func:`load`
always passes `weights_only` explicitly, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD (which only changes a torch.load that
does not pass it) does not unlock it; TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 keeps even an opted-in load weights-only.
Earlier versions of this package ran fairseq's loader with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 forced for the call.

Importing this module imports neither torch nor numpy (the `fairseq-compgen` command starts without them).
"""
import argparse
import ast
import functools
import os
import pickle
import re
from pathlib import Path

from fairseq_compgen.errors import MissingFileError, UsageError

TRUST_VAR = "FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS"


class UntrustedCheckpointError(UsageError):
    """A checkpoint holds a type outside the allowlist, or a setting that is code; `.path` and `.type` name them."""

    def __init__(self, path: str, type_name: str, setting: str = ""):
        self.path, self.type = path, type_name
        hint = (f"if you trust this file, load it with {TRUST_VAR}=1" if not trusted() else
                f"{TRUST_VAR}=1 is set, but so is TORCH_FORCE_WEIGHTS_ONLY_LOAD, which keeps torch weights-only")
        if setting:
            super().__init__(f"{path}: its setting {setting} = {type_name!r} is code that fairseq or this package "
                             f"would run with eval() when building the model: refused; {hint}")
        else:
            super().__init__(f"{path} holds {type_name}, which is not among the types a fairseq checkpoint holds "
                             f"(unpickling it could run code): refused; {hint}")


def trusted() -> bool:
    """The user opted in to full unpickling (FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS=1)."""
    return os.environ.get(TRUST_VAR, "").strip().lower() in ("1", "y", "yes", "true")


def allowlist() -> list:
    """What fairseq checkpoints hold besides tensors, dicts, lists, OrderedDicts and Python scalars (which torch's
    weights-only unpickler accepts by itself). Found with torch.serialization.get_unsafe_globals_in_checkpoint on
    checkpoints trained with this package (tests/test_safe_loading.py trains them)."""
    import numpy as np

    core = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray  # numpy >= 2 / numpy 1.x
    return [
        # fairseq stores the model config, state["cfg"]["model"], and legacy state["args"] as a Namespace (every
        # checkpoint: rel_uni_transformer_scan, sag_t5_transformer_scan, syntactic_attention_scan, transformer)
        argparse.Namespace,
        # numpy float64 scalars: the training meters in state["extra_state"]["metrics"] keep the logged values;
        # cogs_tagging logs its loss as float / np.log(2), a np.float64 (a scalar pickles as scalar(dtype, bytes);
        # the dtype as np.dtype("f8") and then its state, set on a Float64DType)
        core.scalar, np.dtype, np.dtypes.Float64DType,
        # numpy int64 arrays: fairseq's --eval-bleu (translation task, our MT recipes) logs the BLEU n-gram counts
        # and totals as np.array(...) in the valid meters (an array pickles as _reconstruct(ndarray, ...) + state)
        core._reconstruct, np.ndarray, np.dtypes.Int64DType,
        # the same two functions under the names numpy 1.x wrote (numpy.core was renamed numpy._core in numpy 2)
        (core.scalar, "numpy.core.multiarray.scalar"), (core._reconstruct, "numpy.core.multiarray._reconstruct"),
    ]


_REFUSED = (re.compile(r"GLOBAL (\S+) (?:was not an allowed global|whose module)"),  # a function or class named
            re.compile(r"but got <class '([^']+)'>"),  # an object of a class not allowed (BUILD / NEWOBJ)
            re.compile(r"unrecognized function (.+)$", re.M))


def _refused_type(message: str) -> str:
    for pattern in _REFUSED:
        m = pattern.search(message)
        if m:
            return m.group(1).strip()
    detail = message.split("WeightsUnpickler error:", 1)[-1].strip()
    return f"an object torch's weights-only unpickler refuses ({detail.splitlines()[0] if detail else message})"


# what a setting's text may not contain: fairseq passes some settings to eval() (utils.eval_bool, eval_str_list and
# eval_str_dict, and plain eval() in models such as fconv), where a call, a lambda or a dunder name runs code
_CODE_NODES = (ast.Call, ast.Lambda, ast.NamedExpr, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
               ast.Await, ast.Yield, ast.YieldFrom)


def _is_code(text: str) -> bool:
    """True when eval(text) could run code: it parses as an expression (as eval would parse it) holding a call, a
    lambda, a comprehension or a dunder name. Paths, names and literals such as "(0.9, 0.98)" or "[4000, 8000]" are
    not; text that does not parse cannot run either."""
    try:
        tree = ast.parse(text.lstrip(" \t"), mode="eval")
    except (SyntaxError, ValueError):  # eval would fail to compile it too (ValueError: a null byte)
        return False
    for node in ast.walk(tree):
        if isinstance(node, _CODE_NODES):
            return True
        if isinstance(node, ast.Name) and node.id.startswith("__") or (
                isinstance(node, ast.Attribute) and node.attr.startswith("__")):
            return True
    return False


def _code_setting(value, where: str, depth: int = 0):
    """(setting, text) of the first string under `value` (dicts, lists, Namespaces: the checkpoint's "args" and
    "cfg") that :func:`_is_code`, or None."""
    if isinstance(value, str):
        return (where, value) if _is_code(value) else None
    if depth > 64:  # fairseq's configs nest 3 deep: a structure this deep is no config, and is refused as such
        return (where, "a structure nested more than 64 deep")
    if isinstance(value, argparse.Namespace):
        value = vars(value)
    if isinstance(value, dict):
        items = ((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for key, item in items:
        found = _code_setting(item, key, depth + 1)
        if found:
            return found
    return None


def check_settings(state, name: str) -> None:
    """Refuse a checkpoint whose settings ("args", "cfg") hold code (:func:`_is_code`), unless the user opted in
    (:func:`trusted`): building its model would run that code, e.g. bool_flag("__import__('os').system(...)")."""
    if trusted() or not isinstance(state, dict):
        return
    found = _code_setting({k: state[k] for k in ("args", "cfg") if k in state}, "")
    if found:
        raise UntrustedCheckpointError(name, found[1], setting=found[0])


def load(f, name=None, map_location="cpu"):
    """torch.load of `f` (a path or an open binary file) with the weights-only unpickler and :func:`allowlist`,
    or with the full unpickler when the user opted in (:func:`trusted`). `name` names the file in errors (default:
    `f` when it is a path). A disallowed type, or a setting that is code (:func:`check_settings`), raises
    UntrustedCheckpointError; other failures (a truncated file) propagate as torch raises them."""
    import torch

    if name is None:  # a path names itself; an open file by its .name (a Path's .name is only its last part)
        name = f if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "the checkpoint")
    name = os.fspath(name) if isinstance(name, os.PathLike) else str(name)
    try:
        # the allowlist also for an opted-in load: the user's TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 makes it weights-only
        with torch.serialization.safe_globals(allowlist()):
            state = torch.load(f, map_location=map_location, weights_only=not trusted())
    except pickle.UnpicklingError as e:
        if "Weights only load failed" not in str(e):
            raise
        raise UntrustedCheckpointError(name, _refused_type(str(e))) from None
    check_settings(state, name)
    return state


def checkpoint_file(path) -> Path:
    """PATH, the checkpoint a command reads, as a Path; MissingFileError when it is no file, and for a folder (a
    run's --save-dir) the checkpoint_last.pt inside it that was probably meant."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        last = path / "checkpoint_last.pt"
        raise MissingFileError(f"{path} is a folder: expected a checkpoint file"
                               + (f", e.g. {last}" if last.is_file() else " (.pt)"))
    raise MissingFileError(f"no checkpoint at {path}")


def stored_updates(path) -> int:
    """The update count a fairseq checkpoint stores (state["optimizer_history"][-1]["num_updates"]), read with
    :func:`load`: UntrustedCheckpointError for a disallowed type, any other exception when it cannot be read."""
    return int(load(path)["optimizer_history"][-1]["num_updates"])


def newest_readable(folder, exclude=None):
    """The checkpoint of FOLDER (checkpoint*.pt, other than EXCLUDE) to resume from when its checkpoint_last.pt
    cannot be read: the readable one at the highest stored update (ties: the first by name, so a numbered save
    before checkpoint_best.pt), read with :func:`load`; ranked by the update it stores, not by file time (a copy or
    `touch` changes the time, not the training). Returns (path or None, its update or None, [(path, type) of each
    file refused as unsafe: never the one chosen])."""
    import glob

    skip = os.path.abspath(exclude) if exclude is not None else None
    readable, refused = [], []
    for other in sorted(glob.glob(os.path.join(os.fspath(folder), "checkpoint*.pt"))):
        if os.path.abspath(other) == skip:
            continue
        try:
            readable.append((stored_updates(other), other))
        except UntrustedCheckpointError as refusal:
            refused.append((other, refusal.type))
        except Exception:  # noqa: BLE001 (cut off, not a checkpoint: not one to resume from)
            continue
    if not readable:
        return None, None, refused
    updates = max(u for u, _ in readable)
    return min(p for u, p in readable if u == updates), updates, refused


class _TorchReadingSafely:
    """The `torch` module as fairseq.checkpoint_utils sees it during one load_checkpoint_to_cpu call: `load` is
    :func:`load` (naming `path` in errors); every other attribute is torch's."""

    def __init__(self, torch_module, path):
        self._torch, self._path = torch_module, path

    def load(self, f, map_location=None, **_ignored):  # fairseq passes map_location=torch.device("cpu")
        return load(f, name=self._path, map_location=map_location)

    def __getattr__(self, attr):
        return getattr(self._torch, attr)


def _reading_safely(checkpoint_utils, original):
    """`original` (a function of fairseq.checkpoint_utils whose first argument is the checkpoint's path) with the
    module's `torch` name swapped for a _TorchReadingSafely during the call, and restored after it."""
    @functools.wraps(original)
    def wrapped(path, *args, **kwargs):
        previous = checkpoint_utils.torch
        checkpoint_utils.torch = _TorchReadingSafely(getattr(previous, "_torch", previous), path)
        try:
            return original(path, *args, **kwargs)
        finally:
            checkpoint_utils.torch = previous

    wrapped._compgen_wrapped = True
    return wrapped


# fairseq's functions that read a checkpoint file with torch.load: the loader of fairseq-generate/-train/eval, and
# the one of fairseq-train --ema-seed-model
WRAPPED = ("load_checkpoint_to_cpu", "load_ema_from_checkpoint")


def wrap_fairseq_loader() -> None:
    """Make fairseq's checkpoint readers (WRAPPED) read through :func:`load` (idempotent). Each one's
    `torch.load(f, ...)` is the only torch.load in it; the wrapper swaps the `torch` name of
    fairseq.checkpoint_utils for the call (one load at a time, as fairseq loads), so the rest (PathManager, the
    config, `_upgrade_state_dict`) stays fairseq's code. fairseq's other callers look these functions up in the
    module at call time (`checkpoint_utils.load_checkpoint_to_cpu(...)`, or a global of the module), so they
    get the wrapped ones."""
    from fairseq import checkpoint_utils

    for name in WRAPPED:
        original = getattr(checkpoint_utils, name)
        if not getattr(original, "_compgen_wrapped", False):
            setattr(checkpoint_utils, name, _reading_safely(checkpoint_utils, original))
