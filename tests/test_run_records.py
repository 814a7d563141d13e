"""A run records the data it trained on (data.json), a resume must use the same data and the same
fairseq-train options (or say --resume-with-other-options, which is recorded), and the aggregator refuses to pool
runs of one dataset trained on different data, also within one folder."""
import json
import os
import shlex
import shutil
import subprocess

import pytest

from fairseq_compgen.errors import UsageError
from fairseq_compgen.pipelines import pooling, tables, train


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_data_fingerprint_follows_content_not_path(scan_bin, tmp_path):
    a = train.data_fingerprint(scan_bin)
    b = train.data_fingerprint(_copy(scan_bin, tmp_path / "elsewhere"))
    assert a == b and set(a["files"]) == {f.name for f in scan_bin.iterdir() if f.is_file()}
    (tmp_path / "elsewhere" / "dict.tgt.txt").write_text((scan_bin / "dict.tgt.txt").read_text() + "extra 1\n")
    assert train.data_fingerprint(tmp_path / "elsewhere")["sha256"] != a["sha256"]


def test_the_same_data_prepared_again_is_the_same_data(scan_bin, tmp_path):
    """fairseq-preprocess writes its command line, with the folders' paths, to preprocess.log beside the data: the same
    data prepared again elsewhere (a fresh machine, a GPU slice) differs there only. data.json still records the log;
    resuming and pooling compare the data files alone (a data file that differs is refused: the tests below)."""
    again = _copy(scan_bin, tmp_path / "prepared_again")
    (again / "preprocess.log").write_text("Namespace(destdir='/elsewhere/bin', trainpref='/elsewhere/train')\n")
    a, b = train.data_fingerprint(scan_bin), train.data_fingerprint(again)
    assert a["sha256"] != b["sha256"] and "preprocess.log" in b["files"]  # recorded as it is
    assert train.same_data_key(a) == train.same_data_key(b)
    save = tmp_path / "run"
    _started_run(save, scan_bin, "--arch rel_uni_transformer_scan --seed 1")
    train.check_resume(save, ["fairseq-train", str(again), "--arch", "rel_uni_transformer_scan", "--seed", "1"], b,
                       False)
    assert train.same_data_key({"sha256": "abc"}) == "abc"  # a record that lists no files: its one hash
    (again / "gen.src-tgt.tgt.bin").write_bytes(b"other")
    assert train.same_data_key(train.data_fingerprint(again)) != train.same_data_key(a)


def _started_run(save, data, flags):
    """A run folder as fairseq-compgen train leaves it after its first updates: its records and a checkpoint."""
    save.mkdir(parents=True)
    (save / "command.txt").write_text("fairseq-train " + str(data) + " " + flags + f" --save-dir {save}\n")
    (save / "data.json").write_text(json.dumps(train.data_fingerprint(data)))
    (save / "checkpoint_last.pt").write_bytes(b"not read by these checks")


def test_resume_refuses_other_options_and_other_data(scan_bin, tmp_path):
    save = tmp_path / "run"
    _started_run(save, scan_bin, "--arch rel_uni_transformer_scan --lr 1e-3 --max-update 100 --seed 1")
    fp = train.data_fingerprint(scan_bin)
    same = ["fairseq-train", str(scan_bin), "--arch", "rel_uni_transformer_scan", "--lr", "1e-3", "--seed", "1"]
    train.check_resume(save, same + ["--max-update", "5000", "--save-dir", str(save)], fp, False)  # longer: fine
    train.check_resume(save, same + ["--validate-interval-updates", "7", "--valid-subset", "valid", "--eval-greedy"],
                       fp, False)  # when and on what it validates: fine
    with pytest.raises(UsageError, match=r"other fairseq-train options .*--lr 1e-3 -> 5e-4.*--resume-with-other-options"):
        train.check_resume(save, [*same[:5], "5e-4", "--seed", "1"], fp, False)
    train.check_resume(save, [*same[:5], "5e-4", "--seed", "1"], fp, True)  # said explicitly
    other = _copy(scan_bin, tmp_path / "other")
    (other / "train.src-tgt.src.bin").write_bytes((scan_bin / "train.src-tgt.src.bin").read_bytes()[::-1])
    with pytest.raises(UsageError, match=r"trained on other data"):
        train.check_resume(save, same, train.data_fingerprint(other), True)


def test_a_run_started_by_torchrun_resumes_and_pools_by_its_fairseq_train_options(scan_bin, tmp_path):
    """command.txt of a run started with --nprocs holds the torchrun command; its words (--standalone,
    --nproc-per-node, --cpu-dist, and "--" before the data folder) counted as options, so no such run could resume
    and two such sweeps on the same data at other paths would not pool (the sweep audit of 2026-11-29)."""
    from fairseq_compgen.pipelines import pooling

    flags = ["--arch", "rel_uni_transformer_scan", "--lr", "1e-3", "--seed", "1"]
    save = tmp_path / "run"
    save.mkdir()
    (save / "command.txt").write_text(shlex.join(train.torchrun_command(2, [str(scan_bin), *flags], cpu=True)) + "\n")
    (save / "data.json").write_text(json.dumps(train.data_fingerprint(scan_bin)))
    (save / "checkpoint_last.pt").write_bytes(b"not read by these checks")
    fp = train.data_fingerprint(scan_bin)
    train.check_resume(save, ["fairseq-train", str(scan_bin), *flags, "--max-update", "50"], fp, False)
    with pytest.raises(UsageError, match=r"--lr 1e-3 -> 5e-4"):
        train.check_resume(save, ["fairseq-train", str(scan_bin), *flags, "--lr", "5e-4"], fp, False)
    plain = tmp_path / "plain.txt"
    plain.write_text(shlex.join(["fairseq-train", str(tmp_path / "elsewhere"), *flags]) + "\n")
    assert pooling.train_options(save / "command.txt") == pooling.train_options(plain)
    assert train.fairseq_train_words(shlex.split((save / "command.txt").read_text()))[:2] == ["fairseq-train",
                                                                                               str(scan_bin)]


def test_train_command_refuses_before_training_and_records_an_allowed_change(scan_bin, tmp_path):
    save = tmp_path / "run"
    _started_run(save, scan_bin, "--arch rel_uni_transformer_scan --lr 1e-3 --batch-size 8 --max-update 4")
    with pytest.raises(UsageError, match="--lr 1e-3 -> 5e-4.*--resume-with-other-options"):
        train.main(["--cpu", "rel_uni_transformer_scan", str(scan_bin), str(save), "--lr", "5e-4", "--batch-size", "8",
                    "--max-update", "4"])
    assert not (save / "options_changed.txt").exists()


def test_aggregate_refuses_runs_of_one_folder_trained_on_different_data(scan_bin, tmp_path):
    from test_pipelines import _fake_sweep  # the fake sweep folder of the aggregation tests

    _fake_sweep(tmp_path / "out", {("scan", "a"): {1: {"gen": 0.1}, 2: {"gen": 0.2}}})
    other = _copy(scan_bin, tmp_path / "other")
    (other / "dict.src.txt").write_text((scan_bin / "dict.src.txt").read_text() + "extra 1\n")
    for seed, data in ((1, scan_bin), (2, scan_bin)):
        run = tmp_path / "out" / "scan" / "a" / f"seed{seed}"
        (run / "command.txt").write_text(f"fairseq-train {data} --arch compgen_transformer --seed {seed}\n")
        (run / "data.json").write_text(json.dumps(train.data_fingerprint(data)))
    pooling.collect(tmp_path / "out")  # the same data: pooled
    again = _copy(scan_bin, tmp_path / "prepared_again")
    (again / "preprocess.log").write_text("prepared again elsewhere\n")
    (tmp_path / "out" / "scan" / "a" / "seed2" / "data.json").write_text(json.dumps(train.data_fingerprint(again)))
    pooling.collect(tmp_path / "out")  # the same data prepared again: pooled too
    (tmp_path / "out" / "scan" / "a" / "seed2" / "data.json").write_text(json.dumps(train.data_fingerprint(other)))
    with pytest.raises(UsageError, match=r"trained on different data for dataset 'scan'"):
        pooling.collect(tmp_path / "out")


def test_a_resumed_run_names_every_commit_it_trained_at(tmp_path):
    """A run stopped and resumed at a later commit trained at both: done.json's "commits" lists each once, in order,
    its "dirty" holds if any tree was, and the aggregator's commit column shows them all (it showed the first only)."""
    from fairseq_compgen.pipelines.runner import trained_at

    a, b = "a" * 40, "b" * 40
    (tmp_path / "commit.txt").write_text(a + "\n")  # the first call's, kept
    assert trained_at(tmp_path) == [a]  # a run recorded before commit.history existed
    (tmp_path / "commit.history").write_text(f"2026-11-25T02:31:13+00:00 {a}\n2026-11-25T02:52:33+00:00 {a}\n"
                                             f"2026-11-25T03:36:55+00:00 {b} dirty\n")
    commits = trained_at(tmp_path)
    assert commits == [a, b + " dirty"]
    done = {"commit": a, "commits": commits, "dirty": any(c.endswith(" dirty") for c in commits)}
    assert tables.commit_text(done) == "aaaaaaa+bbbbbbb dirty"
    assert tables.commit_text({"commit": a, "dirty": False}) == "aaaaaaa"  # an older done.json
    assert tables.commit_text({}) == "unknown"
    assert trained_at(tmp_path / "absent") == []
    # a restart from scratch at b (no checkpoint: train.record rewrote commit.txt) after a start at a that saved
    # nothing: only b's training is kept, and done.json's "commit" (the first) names b, not the discarded a
    (tmp_path / "commit.txt").write_text(b + "\n")
    (tmp_path / "commit.history").write_text(f"2026-11-25T02:31:13+00:00 {a}\n2026-11-25T02:52:33+00:00 {b}\n"
                                             f"2026-11-25T03:36:55+00:00 {a}\n")
    assert trained_at(tmp_path) == [b, a]


def test_commit_txt_names_the_start_of_the_kept_training(tmp_path):
    """train.record's rule that trained_at relies on: commit.txt is rewritten by a call that finds no checkpoint
    (a start or a restart from scratch) and kept by a resuming call; every call is in commit.history."""
    from fairseq_compgen.pipelines.runner import trained_at

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    train.record(tmp_path, "commit.txt", a)  # started at a, stopped before any checkpoint
    train.record(tmp_path, "commit.txt", b)  # restarted from scratch at b
    (tmp_path / "checkpoint_last.pt").write_bytes(b"saved")
    train.record(tmp_path, "commit.txt", c)  # resumed at c
    assert (tmp_path / "commit.txt").read_text() == b + "\n"
    assert trained_at(tmp_path) == [b, c]


def test_a_copy_without_git_is_its_commit_only_when_the_manifest_checks_out(tmp_path, monkeypatch):
    """The working tree sent to a GPU machine cannot rely on a .git there: commit.manifest names the commit, and every
    file's blob hash is checked against it; a changed or missing file makes it dirty."""
    from fairseq_compgen.pipelines import train

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "a.py").write_text("x = 1\n")
    (repo / "b.txt").write_bytes(b"bytes\0and more")
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True, text=True).stdout
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "m")
    head = git("rev-parse", "HEAD").strip()
    (repo / train.MANIFEST).write_text(head + "\n" + git("ls-tree", "-r", "HEAD"))
    shutil.rmtree(repo / ".git")
    assert train.manifest_commit(repo) == head
    monkeypatch.setenv(train.MANIFEST_ENV, str(repo / train.MANIFEST))  # what gpu_oneshot.sh sets
    assert train.commit() == head
    assert train.manifest_mismatch(repo) is None
    (repo / "pkg" / "a.py").write_text("x = 2\n")
    assert train.manifest_commit(repo) == head + " dirty" and train.manifest_mismatch(repo) == "pkg/a.py: differs"
    (repo / "pkg" / "a.py").unlink()
    assert train.manifest_commit(repo) == head + " dirty" and train.manifest_mismatch(repo) == "pkg/a.py: missing"
    assert train.manifest_commit(tmp_path) is None


def test_a_checkpoint_last_cut_off_mid_copy_is_replaced_by_the_newest_whole_save(tmp_path):
    """fairseq copies each save over checkpoint_last.pt in place; stopped mid-copy, the file is cut off. The run
    resumes from the newest readable save instead, and the cut-off file is kept aside."""
    import torch

    from fairseq_compgen.pipelines import train

    def save(name, updates):
        torch.save({"optimizer_history": [{"num_updates": updates}], "model": {"w": torch.ones(64, 64) * updates}},
                   tmp_path / name)
    save("checkpoint_3_20.pt", 20)
    save("checkpoint_5_40.pt", 40)
    (tmp_path / "checkpoint_3_20.pt").touch()  # the newest save by its update, not by its time
    save("checkpoint_last.pt", 40)
    assert train.repair_last(tmp_path) is None  # readable: left alone
    whole = (tmp_path / "checkpoint_last.pt").read_bytes()
    (tmp_path / "checkpoint_last.pt").write_bytes(whole[: len(whole) // 2])
    said = train.repair_last(tmp_path)
    assert "kept as checkpoint_last.pt.incomplete" in said and "checkpoint_5_40.pt (update 40)" in said, said
    assert train.checkpoint_updates(tmp_path / "checkpoint_last.pt") == 40
    assert (tmp_path / "checkpoint_last.pt.incomplete").read_bytes() == whole[: len(whole) // 2]
    assert not (tmp_path / "checkpoint_last.pt.tmp").exists()
    (tmp_path / "checkpoint_last.pt").write_bytes(whole[:100])  # cut off again: the first kept file stays
    assert "kept as checkpoint_last.pt.incomplete.2" in train.repair_last(tmp_path)
    assert (tmp_path / "checkpoint_last.pt.incomplete").read_bytes() == whole[: len(whole) // 2]
    assert (tmp_path / "checkpoint_last.pt.incomplete.2").read_bytes() == whole[:100]
    # nothing readable to go back to: left as it is (fairseq-train then says why it cannot resume)
    for p in tmp_path.glob("checkpoint_*_*.pt"):
        p.unlink()
    cut = whole[: len(whole) // 2]
    (tmp_path / "checkpoint_last.pt").write_bytes(cut)
    assert train.repair_last(tmp_path) is None and (tmp_path / "checkpoint_last.pt").read_bytes() == cut
    # unreadable, not "untrusted" (checkpoint_updates lets that through): torch read some cut-off zips as legacy
    # pickles and met bytes that are no type at all (gpu_oneshot's test, 2026-11-26)
    assert train.checkpoint_updates(tmp_path / "checkpoint_last.pt") is None


def test_the_runner_repair_and_the_train_guard_name_the_same_checkpoint(tmp_path):
    """One rule for "the checkpoint to resume from" (checkpoint_loading.newest_readable): the highest stored update,
    not the newest file time; a numbered save before checkpoint_best.pt at the same update. The sweep runner copies
    it (train.repair_last); `fairseq-train`/`fairseq-compgen train` on a user's folder names it in its refusal."""
    import torch

    from fairseq_compgen.checkpoint_loading import newest_readable
    from fairseq_compgen.tasks.checkpoint_guard import _load

    for name, updates in (("checkpoint_2_30.pt", 30), ("checkpoint_best.pt", 30), ("checkpoint_1_10.pt", 10)):
        torch.save({"optimizer_history": [{"num_updates": updates}]}, tmp_path / name)
    (tmp_path / "checkpoint_9_90.pt").write_bytes(b"PK\x03\x04 cut off")  # unreadable: never chosen
    (tmp_path / "checkpoint_last.pt").write_bytes(b"PK\x03\x04 cut off too")
    os.utime(tmp_path / "checkpoint_1_10.pt", (2_000_000_000, 2_000_000_000))  # the newest file time, update 10
    last = tmp_path / "checkpoint_last.pt"
    assert newest_readable(tmp_path, exclude=last) == (str(tmp_path / "checkpoint_2_30.pt"), 30, [])
    with pytest.raises(UsageError) as e:
        _load(str(last))
    assert f"cp {tmp_path / 'checkpoint_2_30.pt'} {last}" in str(e.value), e.value
    assert "copy of checkpoint_2_30.pt (update 30)" in train.repair_last(tmp_path)
    assert newest_readable(tmp_path / "none", exclude=None) == (None, None, [])
