"""--random-batches (tasks/batching.py) on the compgen task: training batches mix lengths, are drawn again each epoch
and the same again for the same epoch (a resumed run); without it, fairseq's batches of one length band."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from model_helpers import build_task


def epoch_batches(task, dataset, epoch):
    """The training batches of `epoch` as fairseq builds them (ids per batch, in the order they are trained on)."""
    itr = task.get_batch_iterator(dataset, max_sentences=32, seed=1, epoch=epoch)
    return [b["id"].tolist() for b in itr.next_epoch_itr(shuffle=True)]


def test_random_batches_mix_lengths_and_are_drawn_again_each_epoch(scan_bin):
    task, _, _ = build_task(scan_bin, "compgen_transformer", ["--random-batches"])
    for split in ("train", "valid"):
        task.load_dataset(split)
    train = task.dataset("train")
    sizes = train.sizes[:, 0] if train.sizes.ndim > 1 else train.sizes  # source lengths
    first, second, first_again = (epoch_batches(task, train, e) for e in (1, 2, 1))
    assert sorted(i for b in first for i in b) == list(range(len(train))) == sorted(i for b in second for i in b)
    assert first != second and first == first_again  # a new draw per epoch; a resumed epoch draws the same
    assert sum(len(set(sizes[b])) > 1 for b in first) >= len(first) - 1  # lengths mixed (a last short batch aside)
    # validation keeps fairseq's order: sorted by length
    valid = task.dataset("valid")
    order = valid.ordered_indices()
    assert (np.diff(valid.src_sizes[order]) >= 0).all()


def test_without_the_flag_each_batch_is_one_length_band(scan_bin):
    task, _, _ = build_task(scan_bin, "compgen_transformer")
    task.load_dataset("train")
    train = task.dataset("train")
    batches = epoch_batches(task, train, 1)
    spans = sorted((train.src_sizes[b].min(), train.src_sizes[b].max()) for b in batches)
    # fairseq's batches cut the length-sorted set: their length ranges follow each other without overlapping
    assert all(hi <= next_lo for (_, hi), (next_lo, _) in zip(spans, spans[1:]))
    assert epoch_batches(task, train, 2) != batches  # fairseq shuffles the batches' order, not their content
    assert sorted(map(sorted, epoch_batches(task, train, 2))) == sorted(map(sorted, batches))


def test_fairseq_train_runs_with_random_batches(scan_bin, tmp_path):
    save = tmp_path / "run"
    cmd = [sys.executable, "-m", "fairseq_compgen.cli", "train", "--recipe", "csordas/scan", "--cpu",
           "compgen_transformer_scan", str(scan_bin), str(save), "--random-batches", "--batch-size", "32",
           "--max-update", "12", "--validate-interval-updates", "12", "--save-interval-updates", "12", "--batch-chunks", "2",
           "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--num-workers", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    log = p.stdout + p.stderr  # fairseq-train's log (a sweep keeps it as train.log)
    assert "'random_batches': True" in log and "'batch_chunks': 2" in log  # each batch in chunks (test_batch_chunks)
    done = [json.loads(line.split("| train | ")[1]) for line in log.splitlines() if "| train | " in line]
    assert done and done[-1]["train_num_updates"] == "12"
    assert "creating new batches for epoch 2" in log  # a new draw for the second epoch


def test_random_batches_load_without_worker_processes(scan_bin):
    """fairseq keeps every epoch's loader workers alive and random batches need a new loader each epoch: one more
    process per epoch until memory ran out (batching.loader_workers); fairseq's own batches keep --num-workers."""
    for flags, workers in ((["--random-batches"], 0), ([], 1)):
        task, _, _ = build_task(scan_bin, "compgen_transformer", flags)
        task.load_dataset("train")
        itr = task.get_batch_iterator(task.dataset("train"), max_sentences=32, seed=1, num_workers=1)
        assert itr.num_workers == workers


@pytest.mark.parametrize("batches, stop, end", [("random", 4, 9), ("fairseq", 9, 16)])
def test_a_run_stopped_mid_epoch_resumes_to_the_weights_of_one_never_stopped(scan_bin, tmp_path, batches, stop, end):
    """What the campaign relies on (its runs are stopped and resumed at any update): with random batches in chunks,
    dropout on, a run stopped after update 4 (mid-epoch: 7 batches of 32 per epoch) and resumed to update 9 (across
    the epoch's end) ends with the weights of a run trained to 9 at once: the same batches, in the same order, with
    the same dropout draws (checked by hand first by an audit, 2026-11-29). fairseq's own batches (sorted by
    length, ties shuffled), stopped in epoch 2 and resumed into epoch 3: fairseq rebuilt them under the seed of the
    epoch a process starts in, other sentences in the same lengths, so a run resumed after its first epoch drifted
    from one never stopped (1e-3 in the weights; audit, 2026-11-29); batching.FirstEpochOrder."""
    import torch

    from fairseq_compgen.checkpoint_loading import load

    def train(save, updates):
        cmd = [sys.executable, "-m", "fairseq_compgen.cli", "train", "--recipe", "csordas/scan", "--cpu",
               "compgen_transformer_scan", str(scan_bin), str(save),
               *(["--random-batches", "--batch-chunks", "2"] if batches == "random" else []), "--batch-size", "32", "--max-update", str(updates), "--validate-interval-updates", "100",
               "--save-interval-updates", str(stop), "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
               "--encoder-layers", "1", "--decoder-layers", "1", "--num-workers", "0", "--disable-validation"]
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert p.returncode == 0, p.stderr[-3000:]
        return p.stdout + p.stderr

    train(tmp_path / "once", end)
    train(tmp_path / "twice", stop)
    log = train(tmp_path / "twice", end)
    epoch = stop // 7 + 1  # 7 batches an epoch
    assert f"(epoch {epoch} @ {stop} updates)" in log, log[-2000:]  # fairseq's "Loaded checkpoint ..." line
    once, twice = (load(tmp_path / run / "checkpoint_last.pt")["model"] for run in ("once", "twice"))
    assert load(tmp_path / "twice" / "checkpoint_last.pt")["optimizer_history"][-1]["num_updates"] == end
    assert once.keys() == twice.keys()
    for name in once:
        assert torch.equal(once[name], twice[name]), name
