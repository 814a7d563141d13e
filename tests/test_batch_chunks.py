"""--batch-chunks (tasks/batch_chunks.py): a training batch computed as chunks of sentences of similar length gives
the whole batch's update (gradients, loss, sample size, logged sums), with each chunk padded to its own longest
sentence; the orthogonality loss keeps the whole batch's weight."""
import pytest
import torch

from fairseq_compgen.errors import UsageError
from fairseq_compgen.tasks import batch_chunks
from model_helpers import build_task, first_batch

NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0", "--activation-dropout", "0"]


class Backward:  # what fairseq's optimizer wrapper does in train_step
    @staticmethod
    def backward(loss):
        loss.backward()


def _step(task, model, criterion, sample, chunks):
    """(loss, sample_size, logging output, {parameter: gradient}) of one train_step with --batch-chunks `chunks`."""
    task.cfg.batch_chunks = chunks
    model.zero_grad()
    loss, size, log = task.train_step(sample, model, criterion, Backward, update_num=0)
    return loss, size, log, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("arch, extra", [
    ("rel_uni_transformer", []),
    ("rel_uni_transformer", ["--encoder-bos", "True"]),  # the campaign's protocol arms use both
    ("compgen_transformer", []),
    ("linear_l2_uni_transformer_scan", ["--criterion", "label_smoothed_cross_entropy_with_orthogonality",
                                   "--orthogonality-lambda", "0.5"]),
])
def test_chunks_give_the_whole_batchs_update(scan_bin, arch, extra):
    task, model, criterion = build_task(scan_bin, arch, ["--random-batches", *NO_DROPOUT, *extra])
    sample = first_batch(task, "train", max_sentences=32)  # random batches: lengths mixed
    pad = task.target_dictionary.pad()
    lengths = (sample["target"] != pad).sum(1)
    assert lengths.min() < lengths.max()
    whole = _step(task, model, criterion, sample, 1)
    chunked = _step(task, model, criterion, sample, 4)
    assert torch.allclose(whole[0], chunked[0], rtol=1e-5) and whole[1] == chunked[1]
    assert set(whole[3]) == set(chunked[3]) and whole[3]
    for name, grad in whole[3].items():  # equal up to float rounding (sums in another order): 1e-6 of the largest
        assert (grad - chunked[3][name]).abs().max() <= 1e-5 * grad.abs().max(), name
    for key, value in whole[2].items():
        if isinstance(value, (int, float)) or torch.is_tensor(value):
            assert torch.allclose(torch.as_tensor(value, dtype=torch.float64),
                                  torch.as_tensor(chunked[2][key], dtype=torch.float64), rtol=1e-5), key
    if "orthogonality" in whole[2]:
        assert float(whole[2]["orthogonality"]) > 0


def test_each_chunk_holds_sentences_of_similar_length_padded_to_its_longest(scan_bin):
    task, _, _ = build_task(scan_bin, "compgen_transformer", ["--random-batches"])
    sample = first_batch(task, "train", max_sentences=32)
    pad = task.target_dictionary.pad()
    chunks = batch_chunks.split_by_length(sample, 4, pad)
    assert len(chunks) == 4
    assert sorted(i for c in chunks for i in c["id"].tolist()) == sorted(sample["id"].tolist())
    longest = [int((c["target"] != pad).sum(1).max()) for c in chunks]
    shortest = [int((c["target"] != pad).sum(1).min()) for c in chunks]
    assert all(a <= b for a, b in zip(longest, shortest[1:]))  # sorted by target length across the chunks
    for c in chunks:
        for tokens in (c["target"], c["net_input"]["prev_output_tokens"]):
            assert tokens.size(1) == int((tokens != pad).sum(1).max())  # no column of padding alone
        src = c["net_input"]["src_tokens"]
        assert src.size(1) == int(c["net_input"]["src_lengths"].max())
        assert c["nsentences"] == src.size(0) and c["ntokens"] == int((c["target"] != pad).sum())
        assert c[batch_chunks.BATCH_TOTALS] == {"ntokens": sample["ntokens"], "nsentences": sample["target"].size(0)}
    assert sum(c["target"].numel() for c in chunks) < sample["target"].numel()  # less padding
    assert batch_chunks.split_by_length(sample, 1, pad) == [sample]


def test_a_bad_count_is_one_line(scan_bin):
    with pytest.raises(UsageError, match=r"^--batch-chunks 0: expected a positive whole number"):
        build_task(scan_bin, "compgen_transformer", ["--batch-chunks", "0"])


def test_the_benchmark_reads_fairseqs_rates_after_the_first_interval():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "batch_chunks.py"
    spec = importlib.util.spec_from_file_location("batch_chunks_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    log = "\n".join(f'2026-11-29 04:00:0{i} | INFO | train_inner | {{"epoch": 1, "ups": "{u}", "train_wall": "12"}}'
                    for i, u in enumerate(("0.5", "2", "4")))
    assert bench.seconds_per_update(log) == pytest.approx((1 / 2 + 1 / 4) / 2)  # the first interval left out
    with pytest.raises(SystemExit, match="at least two train_inner lines"):
        bench.seconds_per_update(log.splitlines()[0])
