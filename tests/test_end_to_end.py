"""SCAN end to end with the real commands: fairseq-compgen prep, fairseq-compgen train (fairseq-train in-process: validation
accuracy, resume, run records), fairseq-generate, scoring, fairseq-compgen eval; every input gets a hypothesis; our
validation decoder equals fairseq's greedy search."""
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
COMPGEN = [sys.executable, "-m", "fairseq_compgen.cli"]
TRAIN = [*COMPGEN, "train", "--recipe", "csordas/scan", "--cpu", "rel_uni_transformer"]
TINY = ("--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 32 --decoder-embed-dim 32 "
        "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 4 "
        "--decoder-attention-heads 4").split()


def run(cmd, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="2", PATH=f"{BIN}:{os.environ['PATH']}")
    p = subprocess.run([str(c) for c in cmd], cwd=REPO, env=env, capture_output=True, text=True, **kw)
    assert p.returncode == 0, f"{cmd[0]} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout + p.stderr


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    out = tmp_path_factory.mktemp("scan")
    run([*COMPGEN, "prep", "scan", "--split", "length_cutoff_26", "--out", out])
    return out / "length_cutoff_26" / "bin"


@pytest.fixture(scope="module")
def trained(scan, tmp_path_factory):
    save = tmp_path_factory.mktemp("run")
    log = run([*TRAIN, scan, save, *TINY,
               "--batch-size", "64", "--max-update", "30", "--validate-interval-updates", "30",
               "--save-interval-updates", "30", "--log-interval", "10", "--num-workers", "0", "--eval-greedy"])
    return save, log


def test_training_logs_accuracy_on_every_valid_subset(trained):
    save, log = trained
    for subset in ("valid", "gen"):  # the recipes log JSON: `| INFO | SUBSET | {"SUBSET_accuracy": ...}`
        records = [json.loads(m) for m in re.findall(rf"\| {subset} \| (\{{.*\}})$", log, flags=re.M)]
        r = next((r for r in records if r.get(f"{subset}_num_updates") == "30"), None)
        assert r, f"no validation record for {subset}:\n{log[-2000:]}"
        assert 0.0 <= float(r[f"{subset}_accuracy"]) <= 1.0
        # teacher-forced verdict == step-by-step greedy decoding (--eval-greedy)
        assert r[f"{subset}_accuracy"] == r[f"{subset}_greedy_accuracy"]
    assert (save / "checkpoint_last.pt").exists() and (save / "command.txt").exists()


def test_rerunning_a_finished_run_is_a_no_op(trained, scan):
    """fairseq-train resumed at --max-update trains one more update and overwrites the checkpoint."""
    save, _ = trained
    ckpt = save / "checkpoint_last.pt"
    before = (ckpt.stat().st_mtime_ns, (save / "command.txt").read_text())
    log = run([*TRAIN, scan, save, *TINY, "--batch-size", "64", "--max-update", "30", "--num-workers", "0"])
    assert f"{ckpt} is at 30 updates and --max-update is 30: already finished, nothing to train" in log
    assert (ckpt.stat().st_mtime_ns, (save / "command.txt").read_text()) == before


def test_a_finished_run_is_not_finished_for_another_run(trained, scan):
    """A finished run's folder answered "already finished" (exit 0) to another seed or arch at the same budget (the
    walkthrough audit of 2026-11-29); the options are compared first, as for a resume."""
    save, _ = trained
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=f"{BIN}:{os.environ['PATH']}")
    p = subprocess.run([*TRAIN, str(scan), str(save), *TINY, "--batch-size", "64", "--max-update", "30",
                        "--num-workers", "0", "--seed", "2"], cwd=REPO, env=env, capture_output=True, text=True)
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 1 and "holds a run started with other fairseq-train options" in last and \
        re.search(r"--seed \S+ -> 2", last) and "already finished" not in p.stderr, p.stderr[-2000:]


def test_a_failed_command_keeps_the_recorded_one(trained, scan):
    """A failing command (here: a resume without the run's model flags) used to overwrite the run's command.txt; it
    is appended to command.history. A mistyped one is refused by fairseq-train's parser before anything is written."""
    save, _ = trained
    before = (save / "command.txt").read_text(), (save / "command.history").read_text()
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=f"{BIN}:{os.environ['PATH']}")
    p = subprocess.run([*TRAIN, str(scan), str(save), "--max-updates", "40"], cwd=REPO, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1] == (
        "fairseq_compgen: error: fairseq-train: unrecognized arguments: --max-updates 40")
    assert ((save / "command.txt").read_text(), (save / "command.history").read_text()) == before
    p = subprocess.run([*TRAIN, str(scan), str(save), "--max-update", "40"], cwd=REPO, env=env,
                       capture_output=True, text=True)  # without the run's model flags: refused before any record
    assert p.returncode == 1 and "holds a run started with other fairseq-train options" in p.stderr.splitlines()[-1]
    assert ((save / "command.txt").read_text(), (save / "command.history").read_text()) == before
    p = subprocess.run([*TRAIN, str(scan), str(save), "--max-update", "40", "--resume-with-other-options"], cwd=REPO,
                       env=env, capture_output=True, text=True)  # let through: fairseq fails to load the checkpoint
    assert p.returncode != 0 and (save / "command.txt").read_text() == before[0]
    history = (save / "command.history").read_text().splitlines()
    assert len(history) >= 2 and "--max-update 40" in history[-1]


def test_resume_continues_from_checkpoint(trained, scan):
    save, _ = trained
    log = run([*TRAIN, scan, save, *TINY,
               "--batch-size", "64", "--max-update", "40", "--validate-interval-updates", "40",
               "--save-interval-updates", "40", "--num-workers", "0", "--valid-subset", "valid"])
    assert re.search(r"loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 30 updates\)", log, re.I), log[-2000:]
    assert re.search(r'\| valid \| \{.*"valid_num_updates": "40"', log)


def test_generate_gives_every_input_a_hypothesis(trained, scan, tmp_path):
    """fairseq's default --required-batch-size-multiple 8 would drop the last, longest batch (fairseq-host trap 1):
    1828 is not a multiple of 8 and 100-sentence batches leave a remainder."""
    save, _ = trained
    out = run([BIN / "fairseq-generate", scan, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen",
               "--path", save / "checkpoint_last.pt", "--gen-subset", "valid", "--beam", "1",
               "--batch-size", "100", "--max-len-b", "30", "--cpu"])
    log = tmp_path / "generate.txt"
    log.write_text(out)
    assert len(re.findall(r"^H-\d+\t", out, flags=re.M)) == 1828
    res = run([sys.executable, "-m", "fairseq_compgen.scoring.exact_match", log, "--expected-count", "1828",
               "--json", tmp_path / "r.json"])
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["n"] == 1828 and 0 <= r["correct"] <= 1828, res


def test_compgen_eval_scores_gen(trained, scan):
    save, _ = trained
    out = run([*COMPGEN, "eval", save / "checkpoint_last.pt", scan, "gen", "--cpu"])
    r = json.loads((save / "eval" / "gen.json").read_text())
    assert r["n"] == 2624, out
    assert "gen" in out and "exact-match accuracy" in out
    assert r["generate_flags"] == "" and "note: --beam" not in out  # greedy, eval's own flags only
    # eval's own output is its result lines: fairseq's INFO lines of the process (importing fairseq set the root
    # logger to DEBUG on stderr, `INFO:name:message`) and torch's pin_memory notice on CPU are left out
    assert "INFO" not in out and "pin_memory" not in out, out
    # greedy exact match: each batch stops at its longest reference + EOS (SCAN length's gen: 48 actions at most)
    assert r["max_len"] == {"from_references": True, "max_len_b": 49}
    # the accuracy counted independently from the generate output eval kept: hypothesis == reference, token for token
    gen = (save / "eval" / "gen.generate.txt").read_text()
    H = {m.group(1): m.group(2).split() for m in re.finditer(r"^H-(\d+)\t\S+\t?(.*)$", gen, flags=re.M)}
    T = {m.group(1): m.group(2).split() for m in re.finditer(r"^T-(\d+)\t?(.*)$", gen, flags=re.M)}
    assert len(H) == len(T) == 2624
    correct = sum(H[i] == T[i] for i in T)
    assert r["correct"] == correct and r["accuracy"] == pytest.approx(correct / 2624)
    # per reference length, counted the same way: SCAN length's gen set holds outputs of 27-48 actions
    for length, c in r["per_length"].items():
        ids = [i for i in T if len(T[i]) == int(length)]
        assert (c["n"], c["correct"]) == (len(ids), sum(H[i] == T[i] for i in ids)), length
    assert sum(c["n"] for c in r["per_length"].values()) == 2624 and min(map(int, r["per_length"])) == 27
    # the outputs kept beside the result: generate's S/T/H/D lines, gzip, scored again to the same result
    outputs = save / "eval" / "gen.outputs.gz"
    kept = gzip.decompress(outputs.read_bytes()).decode()
    assert kept == "".join(line for line in gen.splitlines(keepends=True) if re.match(r"[STHD]-\d+\t", line))
    assert len(kept.splitlines()) == 4 * 2624
    again = run([*COMPGEN, "score", "exact_match", outputs, "--json", save / "rescored.json"])
    rescored = json.loads((save / "rescored.json").read_text())
    assert {k: rescored[k] for k in ("n", "correct", "per_length")} == {k: r[k] for k in ("n", "correct", "per_length")}, again
    # an unchanged rerun writes the same bytes (no time in the gzip header)
    before = outputs.read_bytes()
    run([*COMPGEN, "eval", save / "checkpoint_last.pt", scan, "gen", "--cpu", "--overwrite"])
    assert outputs.read_bytes() == before


def test_eval_with_beam_search_says_so_and_records_its_flags(trained, scan, tmp_path):
    """--generate-flags reach fairseq-generate and the result JSON records them; a --beam over 1 with exact match
    prints the note on fairseq's beam search ending a sentence once that many hypotheses have ended. A beam decodes
    to fairseq's length limit or the user's, never to one read from the references (where outputs are cut changes
    which hypothesis a beam returns: a bound beam of 4 found 1,530 exact matches with the references' limits and
    1,089 with fairseq's, 2026-11-29)."""
    from fairseq_compgen.pipelines.evaluate import length_limit, requested_beam

    save, _ = trained
    out = run([*COMPGEN, "eval", save / "checkpoint_last.pt", scan, "valid", "--cpu", "--out", tmp_path,
               "--generate-flags", "--beam 2 --lenpen 1.5 --max-len-b 60"])
    r = json.loads((tmp_path / "valid.json").read_text())
    assert r["generate_flags"] == "--beam 2 --lenpen 1.5 --max-len-b 60" and r["n"] == 1828
    assert "note: --beam 2 with an exact-match metric" in out
    assert "'beam': 2" in (tmp_path / "valid.generate.txt").read_text()  # fairseq-generate's config as it ran
    assert r["max_len"] == {"from_references": False, "max_len_a": 0.0, "max_len_b": 60}  # the user's limit
    assert "'max_len_from_target': False" in (tmp_path / "valid.generate.txt").read_text()
    greedy = (["--max-len-a", "0", "--max-len-b", "49", "--max-len-from-target"], {"from_references": True,
                                                                                   "max_len_b": 49})
    assert length_limit("exact_match", [], 49) == length_limit("exact_match", ["--beam", "1", "--cpu"], 49) == greedy
    for metric, flags, b in [("exact_match", "--beam 4", 200), ("exact_match", "--beam 1 --beam-stop bound", 200),
                             ("exact_match", "--sampling", 200), ("exact_match", "--max-len-b 30", 30),
                             ("bleu", "", 200), ("comp", "--beam 5 --max-len-b 300", 300)]:
        assert length_limit(metric, flags.split(), 49) == ([], {"from_references": False, "max_len_a": 0.0,
                                                                "max_len_b": b}), (metric, flags)
    assert [requested_beam(f.split()) for f in ("", "--beam 4", "--beam=3 --cpu", "--nbest 2", "--beam x",
                                                "--beam 4 --beam-stop bound")] == \
        [(1, "fairseq"), (4, "fairseq"), (3, "fairseq"), (1, "fairseq"), (1, "fairseq"), (4, "bound")]
    # --beam-stop bound (tasks/beam_stop.py) reaches fairseq-generate through the task's flags: no note, and on the
    # same beams (the same length limit) no sentence's output scores below the one fairseq's search returned
    out = run([*COMPGEN, "eval", save / "checkpoint_last.pt", scan, "valid", "--cpu", "--out", tmp_path / "bound",
               "--generate-flags", "--beam 2 --lenpen 1.5 --beam-stop bound --max-len-b 60"])
    bound_record = json.loads((tmp_path / "bound" / "valid.json").read_text())
    assert "note: --beam" not in out and bound_record["n"] == 1828
    assert bound_record["max_len"] == {"from_references": False, "max_len_a": 0.0, "max_len_b": 60}  # the user's

    def scores(path):  # H-<id> <score> <tokens>: the score of each sentence's best hypothesis
        return {m[1]: float(m[2]) for m in re.finditer(r"^H-(\d+)\t(\S+)", path.read_text(), flags=re.M)}

    fairseq, bound = scores(tmp_path / "valid.generate.txt"), scores(tmp_path / "bound" / "valid.generate.txt")
    assert bound.keys() == fairseq.keys() and len(bound) == 1828
    assert all(bound[i] >= fairseq[i] - 1e-3 for i in bound)


def test_validation_decoder_equals_fairseq_greedy_search(trained, scan):
    """The task's own greedy decoding (used for `accuracy` during training) must produce exactly the hypotheses of
    fairseq's SequenceGenerator with beam 1 and --min-len 0 (what fairseq-compgen eval runs; fairseq's default
    --min-len 1 forbids an empty prediction, which Csordás et al.'s greedy decoding allows)."""
    from fairseq import checkpoint_utils

    from fairseq_compgen.tasks.greedy import greedy_decode

    save, _ = trained
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(save / "checkpoint_last.pt")], arg_overrides={"data": str(scan)})
    model = models[0].eval()
    task.load_dataset("gen")
    itr = task.get_batch_iterator(task.dataset("gen"), max_sentences=64).next_epoch_itr(shuffle=False)
    sample = next(itr)
    gen = task.build_generator(models, argparse_ns(beam=1, max_len_a=0, max_len_b=50, min_len=0))
    hyps = task.inference_step(gen, models, sample)
    eos = task.target_dictionary.eos()
    net = sample["net_input"]
    ours = greedy_decode(model, net["src_tokens"], net["src_lengths"], 50, eos)  # [B, 50]
    assert len(hyps) == ours.size(0) == net["src_tokens"].size(0) > 1  # every sentence of the batch compared
    for b, h in enumerate(hyps):
        theirs = h[0]["tokens"].tolist()[:-1]  # fairseq ends every hypothesis with EOS (forced at max length)
        mine = ours[b].tolist()
        mine = mine[: mine.index(eos)] if eos in mine else mine
        assert mine == theirs, (b, mine, theirs)


def argparse_ns(**kw):
    import argparse

    return argparse.Namespace(**kw)


def test_bad_scan_file_gives_file_and_line(tmp_path):
    bad = tmp_path / "tasks_train_simple.txt"
    bad.write_text("IN: jump OUT: I_JUMP\nIN: walk I_WALK\n")
    from fairseq_compgen.data.io import DataError
    from fairseq_compgen.data.scan import read_scan_file

    with pytest.raises(DataError, match=r"tasks_train_simple\.txt:2:"):
        read_scan_file(bad)



def test_search_errors_of_a_run_count_every_wrong_output(trained, scan, tmp_path):
    """campaign/search_errors.py on a trained checkpoint and the outputs eval kept, decoded to fairseq's length limit:
    every wrong output is a search error or a model error, and the wrong ones are those eval counted. The outputs of
    eval's default greedy decoding (each batch stopped at its longest reference) are refused in one line, and have
    the same exact matches: greedy tokens do not depend on where decoding stops."""
    save, _ = trained
    run([*COMPGEN, "eval", save / "checkpoint_last.pt", scan, "valid", "--cpu", "--out", tmp_path / "capped"])
    p = subprocess.run([sys.executable, REPO / "campaign" / "search_errors.py", save / "checkpoint_last.pt", scan,
                        tmp_path / "capped" / "valid.outputs.gz"], capture_output=True, text=True)
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1].endswith("decode again with --generate-flags \"--max-len-b 200\" "
                                                      "(fairseq's own limit) and classify those outputs"), p.stderr
    run([*COMPGEN, "eval", save / "checkpoint_last.pt", scan, "valid", "--cpu", "--out", tmp_path,
         "--generate-flags", "--max-len-b 200"])
    capped = json.loads((tmp_path / "capped" / "valid.json").read_text())
    assert {k: capped[k] for k in ("correct", "per_length")} == {
        k: json.loads((tmp_path / "valid.json").read_text())[k] for k in ("correct", "per_length")}
    out = run([sys.executable, REPO / "campaign" / "search_errors.py", save / "checkpoint_last.pt", scan,
               tmp_path / "valid.outputs.gz", "--json", tmp_path / "errors.json"])
    result, scored = (json.loads((tmp_path / name).read_text()) for name in ("errors.json", "valid.json"))
    assert result["n"] == scored["n"] == 1828 and result["wrong"] == 1828 - scored["correct"]
    assert result["search_errors"] + result["model_errors"] == result["wrong"] > 0, out
    assert sum(c["wrong"] for c in result["per_length"].values()) == result["wrong"]
    assert f"{result['search_errors']} search errors" in out
