"""`fairseq-compgen train`: fairseq-train with a recipe, in this process, on CPU, one or several GPUs, or N CPU processes.

    fairseq-compgen train [--recipe NAME] [--cpu | --gpus N | --nprocs N] [--dry-run] ARCH DATA SAVE [fairseq-train flags]

--recipe NAME  a training recipe of fairseq_compgen/recipes/recipes.yaml (`fairseq-compgen recipes` lists them): its
               optimizer, lr, schedule, batch, budget, clipping, criterion and validation subsets; without it only
               the structural defaults every recipe shares (task compgen, or cogs_tagging for a tagging folder;
               greedy exact-match validation on every subset of DATA but train; JSON logs)
--cpu          one CPU process
--gpus N       N GPUs in one node: --distributed-world-size N, fairseq spawns one process per GPU (NCCL)
--nprocs N     N processes started by torchrun (torch.distributed.run --standalone) on this machine: on CPU
               (with --cpu) they train on gloo with legacy_ddp, on GPUs fairseq reads torchrun's environment
--dry-run      check the arch and the options as fairseq-train's parser reads them, print the fairseq-train
               command (or the torchrun command) and exit; DATA and SAVE need not exist

Flags after SAVE go to fairseq-train and win over the recipe (fairseq takes the last occurrence), e.g.
--max-update 2000 --seed 3. A rerun on the same SAVE resumes from SAVE/checkpoint_last.pt (fairseq does this);
a rerun of a run whose checkpoint_last.pt is already at --max-update does nothing. SAVE/command.txt (the exact
fairseq-train command), launch.txt (this command line), commit.txt (the package's git HEAD, then "dirty" when
tracked files differ) and machine.txt (where it trains: host, CPU, cores, threads, GPU, torch; one JSON line) keep
what the run's first command was, and data.json the sha256 of every file of DATA; every invocation is appended,
dated, to SAVE/*.history. A resumed run must train on the same data and with the same fairseq-train options
(but where it logs, how long it trains, and when and on what it validates and saves), unless
--resume-with-other-options (then recorded in SAVE/options_changed.txt). OMP_WAIT_POLICY
defaults to PASSIVE (set by the `fairseq-compgen` command; docs/results.md, "Speed on CPU").
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import logging
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import List, NoReturn, Optional, Sequence

from fairseq_compgen import recipes
from fairseq_compgen.errors import Interrupted, UsageError, check_output_folder, exit_before_finalizing, read_json

PACKAGE = recipes.PACKAGE
CPU_DIST = ["--distributed-backend", "gloo", "--ddp-backend", "legacy_ddp"]


OWN_OPTIONS = {"--recipe", "-r", "--gpus", "--nprocs"}  # options of this command that fairseq-train does not have


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fairseq-compgen train", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--recipe", "-r", help="training recipe (fairseq-compgen recipes lists them)")
    dev = p.add_mutually_exclusive_group()
    dev.add_argument("--cpu", action="store_true", help="train on CPU")
    dev.add_argument("--gpus", type=int, default=1, help="GPUs in this node (fairseq spawns one process each)")
    p.add_argument("--nprocs", type=int, default=0, help="processes started by torchrun (with --cpu: gloo)")
    p.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    p.add_argument("arch", help="a registered arch (fairseq-compgen help lists them), or '-' for the recipe's own")
    p.add_argument("data", help="a fairseq-preprocess folder (fairseq-compgen prep ...)")
    p.add_argument("save", help="the run's folder (--save-dir)")
    p.add_argument("flags", nargs=argparse.REMAINDER, help="fairseq-train flags (win over the recipe)")
    return p


def check_data(data: Path) -> None:
    if not (data / "dict.src.txt").is_file():
        raise UsageError(f"{data} has no dict.src.txt: is it a fairseq-preprocess folder (fairseq-compgen prep ...)?")
    if not list(data.glob("train.*.idx")) and not (data / "train.parent").is_file():
        raise UsageError(f"{data} has dictionaries but no binarized train subset (train.*.idx): rerun its "
                         f"`fairseq-compgen prep` command")


def data_fingerprint(data: Path) -> dict:
    """What a run trains on, whatever the folder's path: the sha256 of every file directly in the data folder
    (binarized subsets, dictionaries, category files; hidden files left out) and one sha256 over that list."""
    files = {}
    for f in sorted(p for p in data.iterdir() if p.is_file() and not p.name.startswith(".")):
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        files[f.name] = h.hexdigest()
    return {"sha256": _files_digest(files), "files": files}


def _files_digest(files: dict) -> str:
    """One sha256 over {file name: sha256}, in name order."""
    return hashlib.sha256("".join(f"{k} {v}\n" for k, v in sorted(files.items())).encode()).hexdigest()


# written beside the binarized data by fairseq-preprocess: its command line (with the folders' paths) and messages,
# which change whenever the same data is prepared again elsewhere; recorded in data.json, never compared
NOT_DATA = frozenset({"preprocess.log"})


def same_data_key(record: dict) -> Optional[str]:
    """What two runs must share to have trained on the same data: one sha256 over a data.json's files but NOT_DATA
    (its "sha256" where it lists no files); None for a record without either."""
    files = record.get("files")
    if not isinstance(files, dict):
        return record.get("sha256")
    return _files_digest({k: v for k, v in files.items() if k not in NOT_DATA})


def sha256sum_files(path: Path) -> Optional[dict]:
    """{file name: sha256} of a `sha256sum` listing (the campaign's and the GPU one-shot's data.sha256: every file of
    a run's data folder, which holds no subfolders), as data.json's "files": names without their folder (the
    campaign's first listings, 2026-11-24, named them from the state folder, scan/length_cutoff_26/bin/...); None
    when there is no such file."""
    if not Path(path).is_file():
        return None
    lines = [line.split(maxsplit=1) for line in Path(path).read_text().splitlines() if line.strip()]
    return {os.path.basename(name.strip()): digest for digest, name in lines}


def recorded_data_key(run: Path) -> Optional[str]:
    """The data a run folder trained on, as same_data_key gives it: from its data.json (fairseq-compgen train), else
    from the campaign's or the GPU one-shot's data.sha256 (every file of its data folder); None without either. One
    reader for the sweep (a moved run), the aggregator (runs pooled) and campaign/gpu_import.py."""
    from fairseq_compgen.errors import read_json

    if (Path(run) / "data.json").is_file():
        record = read_json(Path(run) / "data.json", "the sha256 of the data files the run trained on "
                                                     "(fairseq-compgen train)")
        return same_data_key(record) if isinstance(record, dict) else None
    files = sha256sum_files(Path(run) / "data.sha256")
    return same_data_key({"files": files}) if files is not None else None


def fairseq_train_words(words: Sequence[str]) -> List[str]:
    """The fairseq-train command of a run's command.txt (its words): the command itself, or, for a torchrun
    command (torchrun_command), "fairseq-train" and the words after its "--": a run started with --nprocs is then
    compared, pooled and hashed by its fairseq-train options and data folder, not by torchrun's own words."""
    words = list(words)
    return ["fairseq-train", *words[words.index("--") + 1:]] if "--" in words else words


def fairseq_options(words: Sequence[str]) -> dict:
    """The options of a fairseq-train command line (words[0] is the program; a torchrun command is read as the
    fairseq-train command it starts), the last of a repeated option winning as in argparse; a flag without a value
    is True; positional words (the data folder) are left out."""
    words = fairseq_train_words(words)
    options, i = {}, 1
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            has_value = i + 1 < len(words) and not words[i + 1].startswith("--")
            options[word] = words[i + 1] if has_value else True
            i += 2 if has_value else 1
        else:
            i += 1
    return options


# options a resumed run may change: where it runs and logs, how long it trains (a run continued to a larger
# --max-update is the same run, longer), and when and on what it validates and saves checkpoints; none of these
# changes what an update does
RESUME_MAY_CHANGE = {"--save-dir", "--user-dir", "--tensorboard-logdir", "--wandb-project", "--cpu", "--num-workers",
                     "--max-update", "--max-epoch", "--patience", "--valid-subset", "--disable-validation",
                     "--best-checkpoint-metric", "--maximize-best-checkpoint-metric", "--batch-size-valid",
                     "--max-valid-steps", "--skip-invalid-size-inputs-valid-test", "--no-epoch-checkpoints",
                     "--no-last-checkpoints", "--no-save", "--restore-file"}
RESUME_MAY_CHANGE_PREFIXES = ("--log-", "--validate-", "--save-", "--keep-", "--eval-", "--no-eval-")


def _may_change(option: str) -> bool:
    return option in RESUME_MAY_CHANGE or option.startswith(RESUME_MAY_CHANGE_PREFIXES)
OTHER_OPTIONS_FLAG = "--resume-with-other-options"


def check_resume(save: Path, command: Sequence[str], fingerprint: dict, allow_other_options: bool) -> None:
    """A run resumed from SAVE/checkpoint_last.pt must train on the same data (data.json) and, unless
    --resume-with-other-options, with the same fairseq-train options as its first command (command.txt) but
    RESUME_MAY_CHANGE: otherwise the checkpoint would continue under settings its records do not name."""
    if not (save / "checkpoint_last.pt").is_file():
        return
    recorded = save / "data.json"
    if recorded.is_file():
        expected = "the data fingerprint fairseq-compgen train recorded when the run started (a JSON object)"
        saved = read_json(recorded, expected)
        if not isinstance(saved, dict):
            raise UsageError(f"{recorded}: expected {expected}")
        before = same_data_key(saved)
        now = same_data_key(fingerprint)
        if before != now:
            raise UsageError(f"{save}/checkpoint_last.pt was trained on other data than {command[1]} (data.json's "
                             f"files but {', '.join(sorted(NOT_DATA))}: sha256 {str(before)[:12]} vs {now[:12]}): "
                             f"resume it on its own data, or train into a new folder")
    if allow_other_options or not (save / "command.txt").is_file():
        return
    old = fairseq_options(shlex.split((save / "command.txt").read_text()))
    new = fairseq_options(list(command))
    diff = sorted(k for k in set(old) | set(new) if not _may_change(k) and old.get(k) != new.get(k))
    if diff:
        shown = "; ".join(f"{k} {old.get(k, '(absent)')} -> {new.get(k, '(absent)')}" for k in diff[:4])
        raise UsageError(f"{save} holds a run started with other fairseq-train options than this command's ({shown}; "
                         f"{save}/command.txt has the first): train into a new folder, or pass {OTHER_OPTIONS_FLAG} "
                         f"to continue it anyway (recorded in {save}/options_changed.txt)")


def fairseq_args(a: argparse.Namespace) -> List[str]:
    """fairseq-train's arguments for the parsed `fairseq-compgen train` command line (the launch flags last)."""
    args = recipes.train_args(a.recipe, None if a.arch == "-" else a.arch, a.data, a.save, a.flags)
    if a.cpu:
        args.append("--cpu")
    elif a.gpus > 1 and not a.nprocs:
        args += ["--distributed-world-size", str(a.gpus)]
    return args


def torchrun_command(nprocs: int, args: Sequence[str], cpu: bool) -> List[str]:
    worker = ["-m", "fairseq_compgen.pipelines.train", "--torchrun-worker", *(["--cpu-dist"] if cpu else [])]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nprocs}",
            *worker, "--", *args]


def last(args: Sequence[str], flag: str) -> Optional[str]:
    """The value of the last `flag` in args (fairseq takes the last occurrence); None when it is not given."""
    value = None
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(flag + "="):
            value = a.split("=", 1)[1]
    return value


def max_update(args: Sequence[str]) -> Optional[int]:
    """The --max-update given; None when there is none or it is 0."""
    value = last(args, "--max-update")
    return int(value) if value not in (None, "0") else None


def check_budget(args: Sequence[str], flags: Sequence[str], need_batch: bool = True) -> None:
    """The budget and batch flags (after the recipe's: ARGS; the user's own: FLAGS), each refused in one line where
    fairseq-train would go wrong: a value that is no whole number (a traceback here, reading --max-update), a negative
    --max-update (fairseq stops after the first update) or --max-epoch, a --batch-size or --max-tokens below 1
    (fairseq then batches the whole data set, in silence), neither of them (fairseq's assertion, a traceback; unless
    not NEED_BATCH), or a --max-update 0 given without a --max-epoch (no limit: it would train until stopped), or,
    as that, neither given (fairseq's defaults are 0 and 0; unless not NEED_BATCH, as for the batch)."""
    value = {}
    for flag in ("--max-update", "--max-epoch", "--batch-size", "--max-sentences", "--max-tokens"):
        text = last(args, flag)
        if text is not None:
            try:
                value[flag] = int(text)
            except ValueError:
                raise UsageError(f"{flag} {text}: expected a whole number") from None
    for flag in ("--max-update", "--max-epoch"):
        if value.get(flag, 0) < 0:
            raise UsageError(f"{flag} {value[flag]}: expected a positive number (0 is no limit, and --max-update 0 "
                             f"needs a --max-epoch)")
    batch = [flag for flag in ("--batch-size", "--max-sentences", "--max-tokens") if flag in value]
    for flag in batch:
        if value[flag] < 1:
            raise UsageError(f"{flag} {value[flag]}: expected a positive number")
    if need_batch and not batch:
        raise UsageError("no --batch-size or --max-tokens: fairseq-train needs one (a --recipe sets it; "
                         "fairseq-compgen recipes lists them)")
    if need_batch and value.get("--max-update", 0) == 0 and value.get("--max-epoch", 0) == 0 and \
            last(flags, "--max-update") != "0":
        raise UsageError("no --max-update or --max-epoch: fairseq-train would train until stopped (its defaults are "
                         "0, no limit); expected a budget (a --recipe sets one: fairseq-compgen recipes lists them)")
    if last(flags, "--max-update") == "0" and value.get("--max-epoch", 0) == 0:
        raise UsageError("--max-update 0 is no limit to fairseq-train and no --max-epoch is set: it would train until "
                         "stopped; expected a positive --max-update (or a --max-epoch)")


def check_arch(args: Sequence[str]) -> None:
    """fairseq's own refusal of an unknown --arch is a page of usage; ours is one line."""
    import fairseq_compgen
    from fairseq.models import ARCH_MODEL_REGISTRY

    fairseq_compgen.register()
    arch = last(args, "--arch")
    if arch not in ARCH_MODEL_REGISTRY:
        raise UsageError(f"--arch {arch!r} is not registered (fairseq-compgen help lists them)")


def check_fairseq_options(args: Sequence[str]) -> None:
    """fairseq-train's own parser on the command's options, before anything is written: what it refuses (an
    unknown flag, a value of the wrong type, a choice it does not offer) is one line naming the flag, where
    fairseq-train would print its whole usage (a few hundred lines) above it, after the run folder was made. Then
    the model's and the task's own checks of the parsed flags (their check_training_flags)."""
    import fairseq_compgen
    from fairseq import options

    fairseq_compgen.register()
    parser = options.get_training_parser()

    def error(message: str) -> NoReturn:  # argparse's ArgumentParser.error: usage, the message, exit status 2
        raise UsageError(f"fairseq-train: {message}")

    parser.error = error
    read_value = parser._get_value  # argparse's call of an option's type, which catches TypeError and ValueError only

    def get_value(action: argparse.Action, text: str):  # fairseq's list options eval() their text: `--lr 1e-3x`
        try:                                               # raised a SyntaxError, a traceback naming no flag
            return read_value(action, text)
        except argparse.ArgumentError:
            raise
        except Exception as e:  # argparse turns this into error("argument --lr: ...")
            raise argparse.ArgumentError(action, f"invalid value {text!r} ({type(e).__name__}: {e})") from None

    parser._get_value = get_value
    quiet = logging.getLogger("fairseq.utils")  # its INFO line that --user-dir is imported already, above ours
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        parsed = options.parse_args_and_arch(parser, list(args))
    finally:
        quiet.setLevel(level)
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    from fairseq_compgen.tasks.checkpoint_guard import check_ignored_flags

    model_cls = ARCH_MODEL_REGISTRY.get(getattr(parsed, "arch", None))
    for cls in (model_cls, TASK_REGISTRY.get(getattr(parsed, "task", None))):
        if hasattr(cls, "check_training_flags"):  # sizes, dropouts, flags that would change nothing (models/*.py,
            cls.check_training_flags(parsed)       # tasks/compgen.py)
    check_ignored_flags(model_cls, parsed, args)


def finished(save: Path, args: Sequence[str]) -> Optional[int]:
    """The update count of SAVE/checkpoint_last.pt when it is at or past --max-update, else None. fairseq-train,
    resumed from such a checkpoint, would train one more update before checking its budget."""
    budget, ckpt = max_update(args), save / "checkpoint_last.pt"
    if budget is None or not ckpt.is_file():
        return None
    done = checkpoint_updates(ckpt)  # None when unreadable: fairseq-train reports that (tasks/checkpoint_guard.py)
    return done if done is not None and done >= budget else None


def checkpoint_updates(ckpt: Path) -> Optional[int]:
    """The update count stored in a fairseq checkpoint; None when it cannot be read (absent, incomplete, not one).
    Read with the safe loader (checkpoint_loading.py): a checkpoint holding a disallowed type is refused, in one
    line."""
    from fairseq_compgen.checkpoint_loading import UntrustedCheckpointError, stored_updates

    try:
        return stored_updates(ckpt)
    except UntrustedCheckpointError:
        raise
    except Exception:
        return None


def repair_last(save: Path) -> Optional[str]:
    """fairseq writes each save whole as checkpoint_E_U.pt (through a temporary name), then copies it over
    checkpoint_last.pt in place: a run stopped during that copy (a session's end, a GPU slice's timeout) leaves
    checkpoint_last.pt cut off, and fairseq-train cannot resume from it. When checkpoint_last.pt cannot be read and a
    save of the run can, the cut-off file is kept as checkpoint_last.pt.incomplete (.incomplete.2, ... after
    earlier repairs) and the newest readable save (by
    the update it stores: checkpoint_loading.newest_readable) is copied to checkpoint_last.pt through a temporary
    name. Returns what was done (one line), or None. The sweep runner does this in its own run folders before
    resuming a run (unattended: a campaign, a GPU slice); `fairseq-compgen train` on a user's folder instead names
    the same checkpoint and the `cp` (tasks/checkpoint_guard.py)."""
    import shutil

    from fairseq_compgen.checkpoint_loading import UntrustedCheckpointError, newest_readable

    last = save / "checkpoint_last.pt"
    try:
        if not last.is_file() or checkpoint_updates(last) is not None:
            return None
    except UntrustedCheckpointError:  # a file the safe loader refuses is not this function's to replace
        return None
    newest, at, _ = newest_readable(save, exclude=last)  # refused files are never chosen
    if newest is None:
        return None
    newest = Path(newest)
    kept = next(save / name for i in range(1, 10 ** 6)  # an earlier repair's cut-off file stays too
                for name in [f"{last.name}.incomplete" + (f".{i}" if i > 1 else "")] if not (save / name).exists())
    last.replace(kept)
    shutil.copyfile(newest, save / "checkpoint_last.pt.tmp")
    (save / "checkpoint_last.pt.tmp").replace(last)
    return (f"{last} was cut off (stopped while fairseq copied a save over it): kept as {kept.name}, "
            f"resuming from a copy of {newest.name} (update {at})")


def interrupted(save: Path) -> str:
    """What a Ctrl-C during training kept in SAVE, and how to go on (fairseq_compgen: interrupted: ...)."""
    ckpt = save / "checkpoint_last.pt"
    if not ckpt.is_file():
        return (f"no checkpoint written yet, {save} keeps only the run's records (command.txt, ...); rerun the same "
                f"command to start training")
    done = checkpoint_updates(ckpt)
    if done is None:
        return (f"{ckpt} is incomplete (it was being written): move it away, then rerun the same command with "
                f"--restore-file set to another checkpoint of {save} to resume from it (or without, to start again)")
    return f"checkpoints up to update {done} kept in {save} ({ckpt.name}); rerun the same command to resume"


MANIFEST = "commit.manifest"  # git rev-parse HEAD > commit.manifest && git ls-tree -r HEAD >> commit.manifest
MANIFEST_ENV = "FAIRSEQ_COMPGEN_COMMIT_MANIFEST"  # set by scripts/gpu_oneshot.sh when a commit.manifest came along


def commit() -> str:
    """The package's git HEAD, with " dirty" when tracked files differ from it; else "unknown" outside a checkout.
    Where $FAIRSEQ_COMPGEN_COMMIT_MANIFEST names a commit.manifest, what that verifies instead (manifest_commit): the
    working tree sent to a GPU machine arrived there (2026-11-26) with a .git that was not at the sender's HEAD."""
    if os.environ.get(MANIFEST_ENV):
        manifest = Path(os.environ[MANIFEST_ENV])
        return manifest_commit(manifest.parent) or f"unknown (no {manifest})"

    def git(*cmd):
        return subprocess.run(["git", "-C", str(PACKAGE.parent), *cmd], capture_output=True, text=True)
    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + (" dirty" if dirty else "")


def manifest_commit(root: Path) -> Optional[str]:
    """The commit that a copy of a checkout without its .git is, from ROOT/commit.manifest (the commit's SHA, then
    `git ls-tree -r HEAD`: mode, type, blob SHA and path of every tracked file), checked rather than trusted: every
    listed file's git blob hash is computed here; "SHA dirty" when one differs or is missing, as `git status` would
    say. None when there is no manifest."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        return None
    return path.read_text().splitlines()[0].strip() + (" dirty" if manifest_mismatch(root) else "")


def manifest_mismatch(root: Path) -> Optional[str]:
    """The first file that ROOT/commit.manifest lists and ROOT does not hold as listed ("PATH: missing" or "PATH:
    differs"), None when every one matches. A manifest lists what was sent: one for a tree sent without results/
    (the device tool's 64 MiB) leaves results/ out (campaign/device_tree.sh slim writes it so)."""
    path = Path(root) / MANIFEST
    for n, line in enumerate(path.read_text().splitlines()[1:], 2):
        try:
            meta, name = line.split("\t", 1)
            mode, kind, blob = meta.split()
        except ValueError:
            raise UsageError(f"{path}:{n}: expected `MODE TYPE SHA<TAB>PATH` (git ls-tree -r), got {line!r}")
        if kind != "blob":  # a submodule: not part of this tree's files
            continue
        f = Path(root) / name
        try:
            data = os.readlink(f).encode() if mode == "120000" else f.read_bytes()
        except OSError:
            return f"{name}: missing"
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != blob:
            return f"{name}: differs"
    return None


def machine(cpu: bool) -> str:
    """Where this run trains, as one JSON line for SAVE/machine.txt: host name, CPU model, cores, torch's intra-op
    threads (OMP_NUM_THREADS), the GPUs unless --cpu (count x name of the first visible one), torch and Python."""
    import platform

    import torch

    model = None
    if os.path.isfile("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    gpu = (f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
           if not cpu and torch.cuda.is_available() else None)
    return json.dumps({"host": platform.node(), "cpu": model or platform.processor() or platform.machine(),
                       "cores": os.cpu_count(), "threads": torch.get_num_threads(), "gpu": gpu,
                       "torch": torch.__version__, "python": platform.python_version()})


LOCK = ".lock"  # the sweep's lock file too (pipelines/sweep.py): one writer per run folder
_held: List[int] = []  # the lock's file descriptor, open (so held) until this process ends


def hold_lock(save: Path) -> None:
    """Take SAVE/.lock (flock) for the rest of this process: two trainings in one folder would write each other's
    checkpoints. A sweep holds the lock of its runs and passes it to the trainer it starts: a lock held through a
    file descriptor this process inherited is ours. Another holder is a UsageError."""
    import fcntl

    save.mkdir(parents=True, exist_ok=True)
    path = save / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _held.append(fd)
        return
    except BlockingIOError:
        st = os.fstat(fd)
        os.close(fd)
    if (st.st_dev, st.st_ino) in _inherited_files():
        return
    raise UsageError(f"{save} is in use by another training or sweep (it holds {path}): expected one writer per run "
                     f"folder; wait for it to end or stop it, or choose another SAVE")


def _inherited_files() -> set:
    """(device, inode) of every file this process has open (Linux /proc/self/fd, else /dev/fd)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        out = set()
        for name in names:
            try:
                st = os.fstat(int(name))
            except (OSError, ValueError):
                continue
            out.add((st.st_dev, st.st_ino))
        return out
    return set()


RECORDS = ("command.txt", "launch.txt", "commit.txt", "machine.txt", "data.json")  # what record() writes in SAVE


def check_records_are_ours(save: Path) -> None:
    """UsageError when SAVE has no checkpoint yet but holds a record file (RECORDS) that no call of this command
    wrote, its *.history not holding its text: record() would replace it (a user's notes, another tool's file)."""
    if (save / "checkpoint_last.pt").is_file():
        return  # record() keeps every existing record of a run with a checkpoint
    for name in RECORDS:
        target, history = save / name, save / (Path(name).stem + ".history")
        if not target.is_file():
            continue
        text = target.read_text(encoding="utf-8", errors="replace").rstrip("\n")
        lines = history.read_text(encoding="utf-8", errors="replace").splitlines() if history.is_file() else []
        if not any(line.split(" ", 1)[-1] == text for line in lines):
            raise UsageError(f"{target} was not written by fairseq-compgen train ({history.name} does not record "
                             f"it), and this run would replace it: move it away, or choose another SAVE")


def record(save: Path, name: str, line: str) -> None:
    """SAVE/NAME keeps the run's first command: written only while the run has no checkpoint (or NAME is absent),
    so a later failing or mistyped command does not replace it; every call is appended, dated, to *.history."""
    save.mkdir(parents=True, exist_ok=True)
    with open(save / (Path(name).stem + ".history"), "a", encoding="utf-8") as f:
        f.write(f"{datetime.datetime.now().astimezone().isoformat(timespec='seconds')} {line}\n")
    target = save / name
    if not (save / "checkpoint_last.pt").is_file() or not target.is_file():
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(line + "\n", encoding="utf-8")
        tmp.replace(target)


def run_fairseq_train(args: Sequence[str]) -> None:
    """fairseq-train in this process (what its console script does)."""
    from fairseq_cli.train import cli_main

    import fairseq_compgen
    from fairseq_compgen.cli import fairseq_logging

    fairseq_compgen.register()  # imported before fairseq, so fairseq's --user-dir import finds it registered
    # fairseq_cli.train configures logging when first imported, unless something logged before (then Python's
    # default `INFO:name:msg` on stderr stays): its own format on stdout, which the log readers expect
    fairseq_logging("INFO", sys.stdout)
    sys.argv = ["fairseq-train", *args]
    cli_main()


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--torchrun-worker"]:
        return worker(argv[1:])
    dry_run = "--dry-run" in argv  # anywhere: flags after SAVE belong to fairseq-train, which has no --dry-run
    other_options = OTHER_OPTIONS_FLAG in argv  # the same
    a = parser().parse_args([x for x in argv if x not in ("--dry-run", OTHER_OPTIONS_FLAG)])
    a.dry_run = dry_run
    data, save = Path(a.data), Path(a.save)
    own = [f for f in a.flags if f.split("=")[0] in OWN_OPTIONS]
    if own:  # after SAVE every flag goes to fairseq-train, which knows none of these (or a --recipe seemed absent)
        raise UsageError(f"{own[0]} comes after SAVE, where flags go to fairseq-train: put fairseq-compgen train's "
                         f"own options ({', '.join(sorted(OWN_OPTIONS))}) before ARCH")
    if a.nprocs < 0 or a.gpus < 1:
        raise UsageError("--nprocs and --gpus take a positive number")
    args = fairseq_args(a)
    check_budget(args, a.flags)
    command = (torchrun_command(a.nprocs, args, a.cpu) if a.nprocs > 1 else ["fairseq-train", *args])
    # the arch and every option as fairseq-train's parser reads them, also for a dry run (its command printed only
    # when fairseq-train would take it; the data and SAVE are left to the run)
    check_arch(args)
    check_fairseq_options(args)
    if a.dry_run:
        print(shlex.join(command))
        return 0
    check_data(data)
    check_output_folder(save, "SAVE (the run's folder)")
    fingerprint = data_fingerprint(data)
    if (save / "checkpoint_last.pt").is_file():  # before "already finished": another arch, seed or data is refused
        check_resume(save, ["fairseq-train", *args], fingerprint, other_options)
    done = finished(save, args)
    if done is not None:
        print(f"fairseq-compgen train: {save}/checkpoint_last.pt is at {done} updates and --max-update is "
              f"{max_update(args)}: already finished, nothing to train", file=sys.stderr)
        return 0
    check_records_are_ours(save)
    hold_lock(save)
    record(save, "command.txt", shlex.join(command))  # fairseq-train ..., or the torchrun command
    record(save, "launch.txt", shlex.join(["fairseq-compgen", "train", *argv]))  # (every call: *.history)
    record(save, "commit.txt", commit())
    record(save, "machine.txt", machine(a.cpu))
    check_resume(save, ["fairseq-train", *args], fingerprint, other_options)
    if other_options and (save / "checkpoint_last.pt").is_file():
        with open(save / "options_changed.txt", "a", encoding="utf-8") as f:
            f.write(f"{datetime.datetime.now().astimezone().isoformat(timespec='seconds')} resumed with "
                    f"{OTHER_OPTIONS_FLAG}: {shlex.join(command)}\n")
    record(save, "data.json", json.dumps(fingerprint))
    if a.nprocs > 1:
        rc = subprocess.call(command)
    else:
        try:
            run_fairseq_train(args)
        except KeyboardInterrupt:
            raise Interrupted(interrupted(save)) from None
        rc = 0
    if rc == 0:
        drop_copies_of_last(save)  # the interval copy of the last save; checkpoint_best.pt stays
    return rc


def drop_copies_of_last(save: Path, best: bool = False) -> List[Path]:
    """Remove the checkpoints of a finished run that hold the same bytes as its ``checkpoint_last.pt``: fairseq
    writes every save as ``checkpoint_E_U.pt`` (or ``checkpointE.pt`` at an epoch's end) and copies it to
    ``checkpoint_last.pt`` (and ``checkpoint_best.pt`` when it is the best), so a finished run kept three identical
    files. ``checkpoint_last.pt`` (what fairseq-train resumes from and `fairseq-compgen eval` reads) always stays;
    ``checkpoint_best.pt`` too unless ``best``. Returns what was removed."""
    import filecmp

    last = Path(save) / "checkpoint_last.pt"
    if not last.is_file():
        return []
    saves = sorted(Path(save).glob("checkpoint_*_*.pt")) + sorted(Path(save).glob("checkpoint[0-9]*.pt"))  # _E_U, E
    candidates = saves + ([Path(save) / "checkpoint_best.pt"] if best else [])
    gone = [p for p in candidates if p.is_file() and p != last and filecmp.cmp(p, last, shallow=False)]
    for p in gone:
        p.unlink()
    return gone


def worker(argv: List[str]) -> NoReturn:
    """One torchrun process: fairseq-train with this rank's place in the group. On GPUs fairseq reads torchrun's
    environment itself; on CPU (--cpu-dist) its own inference divides by the GPU count, so the rank is given."""
    cpu = argv[:1] == ["--cpu-dist"]
    args = argv[1 + cpu:] if argv[cpu:cpu + 1] == ["--"] else argv[cpu:]
    if cpu:
        rank, world = os.environ["RANK"], os.environ["WORLD_SIZE"]
        args = [*args, "--distributed-world-size", world, "--distributed-rank", rank,
                "--distributed-init-method", "env://", "--distributed-no-spawn", *CPU_DIST]
    run_fairseq_train(args)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        # the group's threads joined here rather than torn down at interpreter exit, where a CPU rank was once seen
        # to abort after training had finished (2026-11-28, CI: "terminate called without an active exception",
        # SIGABRT, and torchrun's exit status 1); torch asks for this call before a program exits
        dist.destroy_process_group()
    # a torchrun rank ends here: its batch iterator's prefetching thread may still be inside torch (max-update stops
    # mid-epoch), which interpreter finalization can turn into SIGABRT after a finished training
    exit_before_finalizing(0)


if __name__ == "__main__":  # the torchrun workers (torchrun_command) start here, not through fairseq-compgen
    from fairseq_compgen.cli import quiet_known_warnings

    quiet_known_warnings()
    sys.exit(main())
