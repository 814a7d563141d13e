"""No silent wrong results: a checkpoint is refused, in one line, where it does not belong.

With the ordinary fairseq commands on real SCAN data: evaluating on dictionaries of the same size in another order
(scored 0.000 instead of the model's accuracy, exit 0, before), resuming a save folder with another --arch whose
parameter shapes happen to fit (trained on silently, before), and resuming from a truncated checkpoint_last.pt
(a zip-archive traceback, before, although an intact checkpoint sat beside it).
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
        "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2").split()


def run(cmd, ok=True):
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=f"{BIN}:{os.environ['PATH']}")
    p = subprocess.run([str(c) for c in cmd], cwd=REPO, env=env, capture_output=True, text=True)
    if ok:
        assert p.returncode == 0, f"{cmd[0]} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def train(data, save, arch="rel_uni_transformer_scan", *extra, ok=True):
    return run([BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen",
                "--arch", arch, *TINY, "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "32", "--cpu",
                "--max-update", "2", "--save-interval-updates", "1", "--keep-interval-updates", "5",
                # no data-loader worker and no prefetch thread: a run that stops mid-epoch at --max-update once
                # aborted at interpreter exit ("terminate called without an active exception", exit -6)
                "--save-dir", save, "--num-workers", "0", "--data-buffer-size", "0",
                *([] if "--validate-interval-updates" in extra else ["--disable-validation"]), *extra], ok=ok)


def one_line_error(p, *needles):
    assert p.returncode != 0
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    errors = [line for line in p.stderr.splitlines() if line.startswith("fairseq_compgen: error: ")]
    assert len(errors) == 1, p.stderr[-3000:]
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def scan(scan_bin):
    """The shared SCAN sample (tests/conftest.py: 200 train, 24 valid, 24 gen; text beside bin/). It used to be the
    whole length split, prepared again here: every refusal below is found before or without the data's size, and
    decoding 1828 valid sentences twice was most of this file's time. Read-only: tests copy before they change it."""
    return scan_bin.parent


@pytest.fixture(scope="module")
def trained(scan, tmp_path_factory):
    save = tmp_path_factory.mktemp("run")
    train(scan / "bin", save)
    return save


def test_a_usage_error_is_one_line():
    p = run([sys.executable, "-c", "import fairseq_compgen; from fairseq_compgen.errors import UsageError; "
                                   "raise UsageError('flag --x: expected y')"], ok=False)
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1] == "fairseq_compgen: error: flag --x: expected y"
    assert "Traceback" not in p.stderr
    p = run([sys.executable, "-c", "import fairseq_compgen; raise KeyError('a bug')"], ok=False)
    assert "Traceback" in p.stderr  # bugs keep their traceback


def test_a_missing_checkpoint_is_one_line(scan, tmp_path):
    p = run([BIN / "fairseq-generate", scan / "bin", "--user-dir", REPO / "fairseq_compgen", "--task", "compgen",
             "--path", tmp_path / "nope.pt", "--gen-subset", "valid", "--cpu"], ok=False)
    one_line_error(p, f"Model file not found: {tmp_path / 'nope.pt'}")


def test_generate_refuses_dictionaries_in_another_order(trained, scan, tmp_path):
    """Same words, same size, another order: binarize valid with the reversed target dictionary."""
    for side in ("src", "tgt"):
        lines = (scan / "bin" / f"dict.{side}.txt").read_text().splitlines()
        (tmp_path / f"dict.{side}.txt").write_text("\n".join(lines[::-1] if side == "tgt" else lines) + "\n")
    other = tmp_path / "bin"
    run([BIN / "fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--validpref", scan / "valid",
         "--srcdict", tmp_path / "dict.src.txt", "--tgtdict", tmp_path / "dict.tgt.txt", "--destdir", other])
    cmd = [BIN / "fairseq-generate", None, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen", "--path",
           trained / "checkpoint_last.pt", "--gen-subset", "valid", "--beam", "1", "--batch-size", "256", "--cpu",
           ]
    cmd[1] = scan / "bin"
    assert run(cmd).returncode == 0  # its own data folder works
    cmd[1] = other
    one_line_error(run(cmd, ok=False), "trained with other dictionaries", str(other))
    # fairseq-interactive reads the dictionaries of its data folder too
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([str(c) for c in [BIN / "fairseq-interactive", other, *cmd[2:8], "--beam", "1", "--cpu",
                                         "--source-lang", "src", "--target-lang", "tgt"]],
                       cwd=REPO, env=env, input="jump twice\n", capture_output=True, text=True)
    one_line_error(p, "trained with other dictionaries", str(other))


def _hypotheses(stdout):
    """{sentence id: hypothesis} from the H-lines of fairseq-generate or fairseq-interactive."""
    return {int(m[1]): m[2] for m in re.finditer(r"^H-(\d+)\t[^\t]*\t(.*)$", stdout, re.M)}


def test_interactive_decodes_as_generate(trained, scan):
    """fairseq-interactive with our task, on the valid set's source lines typed in, gives fairseq-generate's greedy
    hypotheses for the same sentences (interactive numbers them in input order, generate by dataset index: the same)."""
    sources = (scan / "valid.src").read_text().splitlines()
    common = ["--user-dir", REPO / "fairseq_compgen", "--task", "compgen", "--path", trained / "checkpoint_last.pt",
              "--beam", "1", "--cpu"]
    generated = _hypotheses(run([BIN / "fairseq-generate", scan / "bin", *common, "--gen-subset", "valid",
                                 "--batch-size", "256"]).stdout)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([str(c) for c in [BIN / "fairseq-interactive", scan / "bin", *common, "--source-lang", "src",
                                         "--target-lang", "tgt", "--buffer-size", len(sources),
                                         "--batch-size", len(sources)]],
                       cwd=REPO, env=env, input="\n".join(sources) + "\n", capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    typed = _hypotheses(p.stdout)
    assert len(sources) == 24 and sorted(typed) == sorted(generated) == list(range(24))
    assert typed == generated


def test_resume_refuses_another_arch(trained, scan, tmp_path):
    """rel_transformer with one layer has exactly rel_uni_transformer's parameters: it used to load and train on."""
    save = tmp_path / "run"
    shutil.copytree(trained, save)
    before = (save / "checkpoint_last.pt").stat().st_mtime_ns
    p = train(scan / "bin", save, "rel_transformer_scan", "--dropout", "0.3", "--max-update", "4", ok=False)
    line = one_line_error(p, str(save / "checkpoint_last.pt"), "--arch rel_uni_transformer_scan -> rel_transformer_scan",
                          "--universal True -> False", "--dropout 0.1 -> 0.3", "--finetune-from-model")
    assert (save / "checkpoint_last.pt").stat().st_mtime_ns == before, line
    train(scan / "bin", save, "rel_uni_transformer_scan", "--max-update", "3")  # the same model resumes


def test_truncated_checkpoint_names_the_intact_one(trained, scan, tmp_path):
    save = tmp_path / "run"
    shutil.copytree(trained, save)
    last = save / "checkpoint_last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    one_line_error(train(scan / "bin", save, "rel_uni_transformer_scan", "--max-update", "4", ok=False),
                   f"{last} cannot be read", f"cp {save / 'checkpoint_1_2.pt'} {last}")


def test_divergence_is_one_line_naming_the_update(scan, tmp_path):
    """A NaN loss used to end with a StopIteration traceback from fairseq's NaN detector."""
    p = train(scan / "bin", tmp_path / "run", "rel_uni_transformer_scan", "--lr", "1e6", "--max-update", "40", ok=False)
    one_line_error(p, "training diverged at update", "(learning rate 1e+06)", "--lr")


def test_resume_refuses_nan_weights(trained, scan, tmp_path):
    import torch

    save = tmp_path / "run"
    shutil.copytree(trained, save)
    state = torch.load(save / "checkpoint_last.pt", weights_only=False)
    name = next(iter(state["model"]))
    state["model"][name].fill_(float("nan"))
    torch.save(state, save / "checkpoint_last.pt")
    one_line_error(train(scan / "bin", save, "rel_uni_transformer_scan", "--max-update", "4", ok=False),
                   "holds NaN/Inf weights", name, "saved at update 2")


def test_an_empty_subset_is_named(trained, scan, tmp_path):
    """An empty subset used to fail with numpy's 'cannot mmap an empty file', naming no file."""
    data = tmp_path / "bin"
    shutil.copytree(scan / "bin", data)
    for lang in ("src", "tgt"):
        (data / f"gen.src-tgt.{lang}.bin").write_bytes(b"")
    p = run([BIN / "fairseq-generate", data, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen", "--path",
             trained / "checkpoint_last.pt", "--gen-subset", "gen", "--beam", "1", "--cpu"], ok=False)
    one_line_error(p, f"{data / 'gen.src-tgt.src.bin'} is empty", "subset 'gen' has no examples")


def test_too_long_examples_are_never_dropped_silently(scan, tmp_path):
    """fairseq drops too-long training examples with a warning, and validation's denominator shrank silently."""
    p = train(scan / "bin", tmp_path / "a", "rel_uni_transformer_scan", "--max-source-positions", "6", ok=False)
    one_line_error(p, "train examples are longer than max positions", "--allow-dropping-train-examples")
    p = train(scan / "bin", tmp_path / "b", "rel_uni_transformer_scan", "--max-source-positions", "6",
              "--allow-dropping-train-examples", "--skip-invalid-size-inputs-valid-test", "--valid-subset", "valid",
              "--validate-interval-updates", "2")
    lines = (scan / "valid.src").read_text().splitlines()
    too_long = sum(len(line.split()) + 1 > 6 for line in lines)  # + EOS
    assert 0 < too_long < len(lines)
    line = re.search(r"valid on 'valid' subset \|.*", p.stdout + p.stderr)
    assert line, (p.stdout + p.stderr)[-3000:]
    accuracy, skipped = (re.search(rf"\| {name} ([0-9.]+) ", line.group(0)) for name in ("accuracy", "skipped"))
    assert int(skipped.group(1)) == too_long and float(accuracy.group(1)) <= (len(lines) - too_long) / len(lines)


def _two_batch_validation(exclude: bool, size: int = 0) -> dict:
    """The logged values of a validation of two batches (4/6 and 2/4 right) of subset `gen` with 5 examples
    skipped as too long; `size`: the subset's examples (0: the task was not told, as before it counted them)."""
    from fairseq import metrics
    from fairseq.criterions.cross_entropy import CrossEntropyCriterion

    from fairseq_compgen.models.standalone import make_dictionary
    from fairseq_compgen.tasks.compgen import CompgenConfig, CompgenTask

    task = CompgenTask(CompgenConfig(exclude_skipped_from_accuracy=exclude), make_dictionary(3), make_dictionary(3))
    task._current_skipped, task._current_size = 5, size
    criterion = CrossEntropyCriterion(task, sentence_avg=False)
    with metrics.aggregate(new_root=True) as agg:
        for correct, total in ((4, 6), (2, 4)):
            task.reduce_metrics([{"_em_correct": correct, "_em_total": total, "loss": 0.0, "ntokens": 1,
                                  "nsentences": total, "sample_size": 1}], criterion)
        return agg.get_smoothed_values()


@pytest.mark.parametrize("exclude, expected", [(False, 6 / 15), (True, 6 / 10)])
def test_skipped_examples_count_as_wrong_unless_excluded(exclude, expected):
    values = _two_batch_validation(exclude)
    assert values["accuracy"] == round(expected, 4) and values["skipped"] == 5


def test_misused_commands_say_so_in_one_line(tmp_path):
    """Found by trying misuses: a tagging folder given to --task compgen (fairseq: 'Could not infer language
    pair' traceback) and a file that is not fairseq-generate output given to `fairseq-compgen score` (a traceback)."""
    folder = tmp_path / "tagging"
    folder.mkdir()
    (folder / "dict.src.txt").write_text("a 1\n")
    one_line_error(train(folder, tmp_path / "run", ok=False), f"{folder}: no binarized language pair",
                   "--task cogs_tagging")
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    one_line_error(run([sys.executable, "-m", "fairseq_compgen.cli", "score", "exact_match", text], ok=False), f"{text}: no T-/H- lines found")


def test_weights_only_relaxation_is_scoped_to_fairseqs_loader(trained, tmp_path):
    """Importing the plugin used to set TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 for the process: now only fairseq's
    checkpoint loader loads pickled configs; a plain torch.load keeps torch's safe default."""
    code = f"""
import argparse, os, torch
import fairseq
import fairseq_compgen
from fairseq import checkpoint_utils
assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" not in os.environ
state = checkpoint_utils.load_checkpoint_to_cpu({str(trained / 'checkpoint_last.pt')!r})
assert state["cfg"]["model"].arch == "rel_uni_transformer_scan"
torch.save({{"args": argparse.Namespace(a=1)}}, {str(tmp_path / 'pickled.pt')!r})
try:
    torch.load({str(tmp_path / 'pickled.pt')!r})
except Exception as e:
    print("refused:", type(e).__name__)
"""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"}
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert p.returncode == 0 and "refused: UnpicklingError" in p.stdout, p.stderr[-2000:]


def test_console_commands_do_not_import_fairseq_or_torch():
    """fairseq-compgen score / sweep / aggregate start without importing fairseq (about 5 s of imports
    before; registration happens when fairseq imports the plugin, or on fairseq_compgen.register())."""
    code = ("import sys, fairseq_compgen.cli, fairseq_compgen.scoring.exact_match, fairseq_compgen.pipelines.sweep, "
            "fairseq_compgen.pipelines.aggregate, fairseq_compgen.pipelines.train, fairseq_compgen.pipelines.evaluate; print(sorted(m for m in ('fairseq', 'torch') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stdout + p.stderr[-2000:]


@pytest.mark.parametrize("exclude, expected", [(False, 6 / 20), (True, 6 / 15)])
def test_examples_validation_never_reached_count_as_wrong(exclude, expected):
    """fairseq's --max-valid-steps stops validation after that many (length-sorted) batches, and the accuracy was
    that of the shortest examples (the audit of 2026-11-29): a subset of 20 examples, 5 skipped as too long, two
    batches (4/6 and 2/4 right) evaluated, 5 never reached: those 5 count as wrong either way."""
    values = _two_batch_validation(exclude, size=20)
    assert values["accuracy"] == round(expected, 4) and values["skipped"] == 5 and "_em_size" not in values


def test_max_valid_steps_reports_the_examples_it_leaves_out(scan, tmp_path):
    """The same through fairseq-train: --max-valid-steps 0 evaluates one batch of 8 of valid's 24 examples, and the
    task says what that does; without the flag it says nothing (a first version warned at every validation: fairseq
    derives the metrics after every batch too)."""
    for steps in (["--max-valid-steps", "0"], []):
        p = train(scan / "bin", tmp_path / f"run{len(steps)}", "rel_uni_transformer_scan", "--valid-subset", "valid",
                  "--validate-interval-updates", "2", "--batch-size-valid", "8", *steps)
        out = p.stdout + p.stderr
        warned = ("--max-valid-steps 0: validation stops after 1 batch(es) of each subset (the shortest examples: "
                  "batches are length-sorted); exact match counts the examples it does not reach as wrong") in out
        assert warned == bool(steps) and "max-valid-steps" not in out.replace("--max-valid-steps 0:", ""), out[-3000:]
        accuracy = re.search(r"valid on 'valid' subset \|.*?\| accuracy ([0-9.]+) ", out)
        assert accuracy, out[-3000:]
        if steps:
            assert float(accuracy.group(1)) <= 8 / 24
