"""Loading a checkpoint never runs code in it.

A malicious checkpoint (a real fairseq checkpoint with one more entry whose pickle calls os.system / exec to
write a marker file) is refused, in one line naming the file and the type, by every path that loads one:
`fairseq-compgen eval`, `fairseq-generate --user-dir fairseq_compgen --path`, `fairseq-interactive` likewise, a fairseq-train resume (our task's
resume check, and fairseq's own loader under a plain fairseq task), `fairseq-compgen train`'s finished check,
checkpoint_guard's unreadable-checkpoint fallback over the neighbours, and `fairseq-compgen plot t5-biases`; the
marker never appears. Real checkpoints of every model family (trained here for 2 updates) load and decode as
before; FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS=1 lets a trusted legacy file with another type load; the user's
TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD is left as it was set.
"""
import datetime
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
        "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2").split()
# one preset per model family: our Transformer (relative, universal), the T5-bias SAG Transformer, Russin et al.'s
# Syntactic Attention (LSTMs, its own flags), and fairseq's own transformer
ARCHS = {"rel_uni_transformer_scan": TINY, "sag_t5_transformer_scan": TINY, "transformer": TINY,
         "syntactic_attention_scan": "--semantic-dim 8 --syntactic-dim 8".split()}
TRAIN_ALL = """
import sys
from fairseq_cli import train
data, root, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
for run in runs:
    arch, *flags = run.split()
    sys.argv = ["fairseq-train", data, "--user-dir", "fairseq_compgen", "--task", "compgen", "--arch", arch, *flags,
                "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "32", "--cpu", "--max-update", "2",
                "--save-dir", f"{root}/{arch}", "--num-workers", "0", "--data-buffer-size", "0",
                "--disable-validation", "--no-epoch-checkpoints"]
    train.cli_main()
"""


def run(cmd, env_extra=None, ok=True):
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=f"{BIN}:{os.environ['PATH']}", **(env_extra or {}))
    env.pop("FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS", None)
    p = subprocess.run([str(c) for c in cmd], cwd=REPO, env=env, capture_output=True, text=True)
    if ok:
        assert p.returncode == 0, f"{cmd[0]} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


class System:
    """Unpickling this runs `os.system(command)`."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class Exec:
    """Unpickling this runs `exec(code)`."""

    def __init__(self, code):
        self.code = code

    def __reduce__(self):
        return exec, (self.code,)


@pytest.fixture(scope="module")
def trained(scan_bin, tmp_path_factory):
    """{arch: checkpoint_last.pt} of 2-update runs, all trained in one process (imports once)."""
    root = tmp_path_factory.mktemp("archs")
    runs = [" ".join([arch, *flags]) for arch, flags in ARCHS.items()]
    run([sys.executable, "-c", TRAIN_ALL, scan_bin, root, *runs])
    return {arch: root / arch / "checkpoint_last.pt" for arch in ARCHS}


def plant(good: Path, out: Path, payload) -> Path:
    """A copy of the real checkpoint `good` at `out` that carries `payload` in its extra_state."""
    state = torch.load(good, weights_only=False)  # our own file, just trained
    state["extra_state"]["payload"] = payload
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, out)
    return out


@pytest.fixture
def evil(trained, tmp_path):
    """(the malicious checkpoint, the marker file its unpickling would create)."""
    marker = tmp_path / "MARKER"
    return plant(trained["rel_uni_transformer_scan"], tmp_path / "evil" / "checkpoint_last.pt",
                 System(f"touch {marker}")), marker


def refused(p, path, kind="posix.system"):
    """The command failed with exactly one line, `fairseq_compgen: error: PATH holds KIND ...`, no traceback."""
    assert p.returncode != 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    errors = [line for line in p.stderr.splitlines() if line.startswith("fairseq_compgen: error: ")]
    assert errors == [f"fairseq_compgen: error: {path} holds {kind}, which is not among the types a fairseq "
                      f"checkpoint holds (unpickling it could run code): refused; if you trust this file, load it "
                      f"with FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS=1"], p.stderr[-3000:]


def test_the_payload_is_real(evil, monkeypatch):
    """The planted checkpoint does run its code under the unsafe loading used before (so the tests below can
    fail), and under the explicit opt-in."""
    path, marker = evil
    torch.load(path, weights_only=False)
    assert marker.exists()
    marker.unlink()
    from fairseq_compgen.checkpoint_loading import load

    monkeypatch.setenv("FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS", "1")
    load(path)
    assert marker.exists()


def test_eval_refuses(evil, scan_bin):
    path, marker = evil
    refused(run([sys.executable, "-m", "fairseq_compgen.cli", "eval", path, scan_bin, "valid", "--cpu"], ok=False),
            path)
    assert not marker.exists()


def test_generate_refuses(evil, scan_bin):
    path, marker = evil
    p = run([BIN / "fairseq-generate", scan_bin, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen",
             "--path", path, "--gen-subset", "valid", "--beam", "1", "--cpu"], ok=False)
    refused(p, path)
    assert not marker.exists()


def test_interactive_refuses(evil, scan_bin):
    path, marker = evil
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS", None)
    p = subprocess.run([str(c) for c in [BIN / "fairseq-interactive", scan_bin, "--user-dir", REPO / "fairseq_compgen",
                                         "--task", "compgen", "--path", path, "--source-lang", "src",
                                         "--target-lang", "tgt", "--beam", "1", "--cpu"]],
                       cwd=REPO, env=env, input="jump twice\n", capture_output=True, text=True)
    refused(p, path)
    assert not marker.exists()


@pytest.mark.parametrize("task", ["compgen", "translation"])
def test_train_resume_refuses(evil, scan_bin, task):
    """--task compgen: our resume check reads SAVE_DIR/checkpoint_last.pt first; --task translation (fairseq's
    own task, no check of ours): fairseq's trainer reads it with load_checkpoint_to_cpu, wrapped by the plugin."""
    path, marker = evil
    p = run([BIN / "fairseq-train", scan_bin, "--user-dir", REPO / "fairseq_compgen", "--task", task,
             "--source-lang", "src", "--target-lang", "tgt",
             "--arch", "rel_uni_transformer_scan" if task == "compgen" else "transformer", *TINY,
             "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "32", "--cpu", "--max-update", "4",
             "--save-dir", path.parent, "--num-workers", "0", "--disable-validation"], ok=False)
    refused(p, path)
    assert not marker.exists()


def test_compgen_train_finished_check_refuses(evil):
    """`fairseq-compgen train` reads checkpoint_last.pt to see whether the run is already finished."""
    from fairseq_compgen.checkpoint_loading import UntrustedCheckpointError
    from fairseq_compgen.pipelines.train import finished

    path, marker = evil
    with pytest.raises(UntrustedCheckpointError, match="holds posix.system") as e:
        finished(path.parent, ["--max-update", "4"])
    assert e.value.path == str(path) and not marker.exists()


def test_plot_t5_biases_refuses(trained, tmp_path):
    marker = tmp_path / "MARKER"
    path = plant(trained["sag_t5_transformer_scan"], tmp_path / "evil.pt",
                 Exec(f"open({str(marker)!r}, 'w').write('ran')"))
    p = run([sys.executable, "-m", "fairseq_compgen.cli", "plot", "t5-biases", path, "-o", tmp_path / "b.png"],
            ok=False)
    refused(p, path, kind="exec")  # torch names builtins.exec "exec"
    assert not marker.exists() and not (tmp_path / "b.png").exists()


def test_guard_fallback_never_unpickles_or_recommends_a_malicious_neighbour(trained, tmp_path):
    """checkpoint_last.pt truncated; beside it, the newest neighbour is malicious and an older one is intact: the
    intact one is recommended, the malicious one is named as refused, and its code never runs."""
    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.tasks.checkpoint_guard import _load

    good, marker = trained["rel_uni_transformer_scan"], tmp_path / "MARKER"
    save = tmp_path / "run"
    save.mkdir()
    last, older, newer = save / "checkpoint_last.pt", save / "checkpoint_1_1.pt", save / "checkpoint_1_2.pt"
    shutil.copy(good, older)
    plant(good, newer, System(f"touch {marker}"))
    last.write_bytes(good.read_bytes()[:1000])
    for i, f in enumerate((older, newer, last)):  # mtimes in this order: newer is the newest neighbour
        os.utime(f, (1_000_000 + i, 1_000_000 + i))
    with pytest.raises(UsageError) as e:
        _load(str(last))
    msg = str(e.value)
    assert f"{last} cannot be read" in msg and f"cp {older} {last}" in msg, msg
    assert f"refused as unsafe, not to be used: {newer} (holds posix.system)" in msg, msg
    assert "\n" not in msg and not marker.exists()
    older.unlink()  # only the malicious neighbour left: nothing to recommend
    with pytest.raises(UsageError) as e:
        _load(str(last))
    assert "no readable checkpoint beside it" in str(e.value) and f"cp {newer}" not in str(e.value), str(e.value)
    assert not marker.exists()


def test_every_family_loads_and_decodes_as_before(trained, scan_bin, tmp_path):
    """Each family's real checkpoint passes the safe loader (fairseq's loader, wrapped) and decodes every valid
    example with `fairseq-compgen eval`'s in-process fairseq-generate (fairseq-generate's own command on a real
    checkpoint: test_end_to_end.py, test_checkpoint_guard.py)."""
    import fairseq_compgen
    from fairseq import checkpoint_utils

    from fairseq_compgen.pipelines.evaluate import evaluate

    fairseq_compgen.register()
    assert checkpoint_utils.load_checkpoint_to_cpu._compgen_wrapped
    n_valid = len((scan_bin.parent / "valid.src").read_text().splitlines())
    for arch, ckpt in trained.items():
        assert torch.serialization.get_unsafe_globals_in_checkpoint(str(ckpt)) == ["argparse.Namespace"]
        state = checkpoint_utils.load_checkpoint_to_cpu(str(ckpt))
        assert state["cfg"]["model"].arch == arch and state["optimizer_history"][-1]["num_updates"] == 2
        result = evaluate(ckpt, scan_bin, ["valid"], cpu=True, out=tmp_path / arch, echo=lambda *a: None)
        assert result["valid"]["n"] == n_valid, (arch, result)
        hypotheses = (tmp_path / arch / "valid.generate.txt").read_text().splitlines()
        assert sum(line.startswith("H-") for line in hypotheses) == n_valid


def test_numpy_values_fairseqs_meters_keep_load(trained, tmp_path):
    """The numpy entries of the allowlist: a np.float64 loss meter (the cogs_tagging criterion logs one) and the
    np.int64 BLEU count arrays of fairseq's --eval-bleu, as fairseq's meters store them in extra_state."""
    import numpy as np

    from fairseq_compgen.checkpoint_loading import load

    state = torch.load(trained["transformer"], weights_only=False)
    state["extra_state"]["metrics"]["valid"] = [
        (10, "loss", "AverageMeter", {"val": np.float64(8.02), "sum": np.float64(51.3), "count": 57, "round": 3}),
        (10, "_bleu_counts", "AverageMeter", {"val": np.array([26, 23]), "sum": np.array([51, 45]), "count": 2})]
    torch.save(state, tmp_path / "meters.pt")
    meters = load(tmp_path / "meters.pt")["extra_state"]["metrics"]["valid"]
    assert meters[0][3]["val"] == np.float64(8.02) and meters[0][3]["val"].dtype == np.float64
    assert meters[1][3]["sum"].tolist() == [51, 45] and meters[1][3]["sum"].dtype == np.int64


def test_a_trusted_legacy_file_loads_with_the_opt_in(trained, tmp_path, monkeypatch):
    """A file holding a harmless type outside the allowlist (a datetime.date) is refused by default, naming the
    type and the opt-in, and loads through fairseq's loader with FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS=1."""
    import fairseq_compgen
    from fairseq import checkpoint_utils

    from fairseq_compgen.checkpoint_loading import UntrustedCheckpointError

    fairseq_compgen.register()
    legacy = plant(trained["rel_uni_transformer_scan"], tmp_path / "legacy.pt", datetime.date(2021, 3, 1))
    monkeypatch.delenv("FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS", raising=False)
    with pytest.raises(UntrustedCheckpointError, match=r"legacy\.pt holds datetime\.date, .*"
                                                       r"FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS=1$"):
        checkpoint_utils.load_checkpoint_to_cpu(str(legacy))
    monkeypatch.setenv("FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS", "1")
    state = checkpoint_utils.load_checkpoint_to_cpu(str(legacy))
    assert state["extra_state"]["payload"] == datetime.date(2021, 3, 1)
    assert state["cfg"]["model"].arch == "rel_uni_transformer_scan" and state["model"]


@pytest.mark.parametrize("setting", ["0", "1"])
def test_the_users_torch_force_setting_is_left_alone(trained, evil, monkeypatch, setting):
    """fairseq's loader used to run with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 forced, whatever the user had set.
    Now the variable keeps the user's value during the load (seen from inside fairseq's loader) and after it; and
    since the safe loader passes weights_only explicitly, the user's 1 does not unlock a malicious file."""
    import fairseq_compgen
    from fairseq import checkpoint_utils

    from fairseq_compgen.checkpoint_loading import UntrustedCheckpointError

    fairseq_compgen.register()
    var = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"
    monkeypatch.setenv(var, setting)
    seen = []
    upgrade = checkpoint_utils._upgrade_state_dict
    monkeypatch.setattr(checkpoint_utils, "_upgrade_state_dict",
                        lambda state: (seen.append(os.environ.get(var)), upgrade(state))[1])
    checkpoint_utils.load_checkpoint_to_cpu(str(trained["transformer"]))
    assert seen == [setting] and os.environ[var] == setting
    path, marker = evil
    with pytest.raises(UntrustedCheckpointError):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert not marker.exists() and os.environ[var] == setting


def test_fairseqs_ema_seed_reader_is_safe_too(trained, tmp_path):
    """fairseq-train --ema-seed-model reads with checkpoint_utils.load_ema_from_checkpoint, a torch.load of its own.
    The checkpoints: a real one with EMA weights where fairseq's --ema keeps them (extra_state["ema"]), and the
    same with a payload."""
    import fairseq_compgen
    from fairseq import checkpoint_utils

    from fairseq_compgen.checkpoint_loading import UntrustedCheckpointError

    fairseq_compgen.register()
    state = torch.load(trained["transformer"], weights_only=False)
    state["extra_state"]["ema"] = state["model"]
    torch.save(state, tmp_path / "ema.pt")
    assert "encoder.embed_tokens.weight" in checkpoint_utils.load_ema_from_checkpoint(str(tmp_path / "ema.pt"))["model"]
    marker = tmp_path / "MARKER"
    evil = plant(tmp_path / "ema.pt", tmp_path / "evil.pt", System(f"touch {marker}"))
    with pytest.raises(UntrustedCheckpointError, match="evil.pt holds posix.system"):
        checkpoint_utils.load_ema_from_checkpoint(str(evil))
    assert not marker.exists()


# ---- settings that are code: fairseq and the models eval() some settings while building the model ---------------
def plant_setting(good: Path, out: Path, name: str, text: str) -> Path:
    """A copy of the real checkpoint `good` at `out` whose model setting `name` (state["cfg"]["model"]) is `text`:
    only types the weights-only unpickler accepts (a Namespace holding a str)."""
    state = torch.load(good, weights_only=False)  # our own file, just trained
    setattr(state["cfg"]["model"], name, text)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, out)
    return out


def code(marker: Path) -> str:
    return f"__import__('os').system('touch {marker}') or True"


# (preset, setting, command): our models' boolean flags (bool_flag) and fairseq's own transformer, which passes
# --adaptive-softmax-cutoff to utils.eval_str_list when it builds its decoder; both commands load through the one
# wrapped fairseq loader (test_eval_refuses, test_generate_refuses)
SETTINGS = [("rel_uni_transformer_scan", "universal", "eval"),
            ("transformer", "adaptive_softmax_cutoff", "fairseq-generate")]


def test_a_setting_that_is_code_would_run_without_the_check(trained, tmp_path, monkeypatch):
    """The planted setting passes the weights-only unpickler, and with the opt-in (no settings check) building
    fairseq's transformer from it runs the code: the refusals below are what keeps it from running."""
    import fairseq_compgen
    from fairseq import checkpoint_utils

    fairseq_compgen.register()
    marker = tmp_path / "MARKER"
    path = plant_setting(trained["transformer"], tmp_path / "cutoff.pt", "adaptive_softmax_cutoff", code(marker))
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(path)) == ["argparse.Namespace"]
    monkeypatch.setenv("FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS", "1")
    try:
        checkpoint_utils.load_model_ensemble([str(path)])
    except Exception:  # noqa: BLE001 (the code ran first; what it returned is no list of cutoffs)
        pass
    assert marker.exists()


@pytest.mark.parametrize("arch, setting, command", SETTINGS)
def test_a_setting_that_is_code_is_refused(trained, scan_bin, tmp_path, arch, setting, command):
    marker = tmp_path / "MARKER"
    path = plant_setting(trained[arch], tmp_path / "evil.pt", setting, code(marker))
    if command == "eval":
        cmd = [sys.executable, "-m", "fairseq_compgen.cli", "eval", path, scan_bin, "valid", "--cpu",
               "--out", tmp_path / "eval"]
    else:
        cmd = [BIN / command, scan_bin, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen", "--path", path,
               "--gen-subset", "valid", "--beam", "1", "--cpu"]
    p = run(cmd, ok=False)
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    errors = [line for line in p.stderr.splitlines() if line.startswith("fairseq_compgen: error: ")]
    assert errors == [f"fairseq_compgen: error: {path}: its setting cfg.model.{setting} = {code(marker)!r} is code "
                      f"that fairseq or this package would run with eval() when building the model: refused; if "
                      f"you trust this file, load it with FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS=1"], p.stderr[-3000:]
    assert not marker.exists()


@pytest.mark.parametrize("text, is_code", [
    ("True", False), ("(0.9, 0.98)", False), ("[4000, 8000]", False), ("{'beam': 4}", False), ("adam", False),
    ("/data/scan/bin", False), ("checkpoint_last.pt", False), ("rel_uni_transformer_scan", False), ("", False),
    ("a b c", False), (" \t[1, 2]", False),
    ("__import__('os').system('x')", True), ("open('x', 'w')", True), (" print(1)", True), ("lambda: 0", True),
    ("[x for x in ()]", True), ("().__class__", True), ("f'{exit()}'", True), ("(y := 1)", True),
])
def test_what_counts_as_code(text, is_code):
    from fairseq_compgen.checkpoint_loading import _is_code

    assert _is_code(text) is is_code


def test_a_boolean_setting_is_read_as_text_never_evaluated():
    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.models.common import bool_flag

    assert [bool_flag(x) for x in ("True", "False", " true", "0", "1", True, 0)] == [True, False, True, False, True,
                                                                                      True, False]
    with pytest.raises(UsageError, match=r"a boolean setting holds 'exit\(\)': expected True or False"):
        bool_flag("exit()")


def test_settings_nested_past_any_config_are_refused(monkeypatch):
    """The walk over the settings has a depth bound; a structure past it is refused, not passed unread."""
    from fairseq_compgen.checkpoint_loading import UntrustedCheckpointError, check_settings

    monkeypatch.delenv("FAIRSEQ_COMPGEN_TRUST_CHECKPOINTS", raising=False)
    deep = "lr"
    for _ in range(70):
        deep = [deep]
    check_settings({"cfg": {"model": {"lr": [[["(0.9, 0.98)"]]]}}}, "x.pt")  # a config's depth: fine
    with pytest.raises(UntrustedCheckpointError, match=r"x\.pt: its setting cfg(\[0\])+ = 'a structure nested more "
                                                       r"than 64 deep'"):
        check_settings({"cfg": deep}, "x.pt")
