"""benchmarks/time_to_accuracy.py end to end on a tiny model: the real training command, its JSON validation
lines read back into a learning curve, JSON and PNG written; and its parser on fairseq's real log format."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import time_to_accuracy  # noqa: E402

TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
        "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2 --batch-size 64 --eval-greedy").split()


def test_parse_valid_line_reads_fairseqs_json_format():
    line = ('2026-11-23 14:40:01 | INFO | gen | {"epoch": 1, "gen_loss": "2.201", "gen_accuracy": "0.25", '
            '"gen_greedy_accuracy": "0.25", "gen_tf_accuracy": "0", "gen_num_updates": "10"}\n')
    subset, m = time_to_accuracy.parse_valid_line(line, ["valid", "gen"])
    assert subset == "gen" and m["num_updates"] == 10 and m["accuracy"] == 0.25
    assert time_to_accuracy.accuracies(m) == {"accuracy": 0.25, "greedy_accuracy": 0.25}
    assert time_to_accuracy.parse_valid_line(line, ["valid"]) is None  # not a requested subset
    assert time_to_accuracy.parse_valid_line("| INFO | train | {broken\n", ["train"]) is None


def test_time_to_accuracy_records_a_learning_curve(scan_bin, tmp_path):
    """On the small SCAN sample (tests/conftest.py: 200 train, 24 valid, 24 gen; it used to prepare and evaluate the
    whole length split, 1828 valid and 2624 gen at each point, most of the test's time)."""
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    out = tmp_path / "curve"
    p = subprocess.run([sys.executable, "benchmarks/time_to_accuracy.py", scan_bin, "--archs", "rel_uni_transformer",
                        "--updates", "20", "--eval-every", "10", "--runs", tmp_path / "runs", "--out", out, "--", *TINY,
                        # 7 batches an epoch: updates 10 and 20 are mid-epoch saves (checkpoint_E_U.pt), as on the
                        # whole split (at batch 64, update 20 would end epoch 5 and save no checkpoint_E_20.pt)
                        "--batch-size", "32"],
                       cwd=REPO, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    result = json.loads((tmp_path / "curve.json").read_text())
    assert result["complete"] and (tmp_path / "curve.png").stat().st_size > 0
    (run,) = result["runs"]
    assert run["status"] == "finished" and [pt["updates"] for pt in run["points"]] == [10, 20]
    for pt in run["points"]:
        assert pt["wall_s"] > 0 and pt["cpu_s"] > 0
        for subset in ("valid", "gen"):  # in-loop accuracy equals step-by-step greedy decoding
            acc = pt[subset]
            assert 0.0 <= acc["accuracy"] <= 1.0 and acc["accuracy"] == acc["greedy_accuracy"]
    assert "--eval-greedy" in run["command"] and "not reached" in p.stdout
    assert "DEBUG:matplotlib" not in p.stdout + p.stderr  # the plot does not print matplotlib's font searches
    # one checkpoint on disk: fairseq's identical copies of checkpoint_last.pt (checkpoint_E_U.pt, _best) are gone
    assert sorted(f.name for f in (tmp_path / "runs" / "rel_uni_transformer_s1").glob("*.pt")) == ["checkpoint_last.pt"]
    # run again: the measurement is not written over (it was: an empty curve and a one-line train.log)
    before = {f: f.read_bytes() for f in (tmp_path / "curve.json", tmp_path / "runs" / "rel_uni_transformer_s1" / "train.log")}
    again = subprocess.run([sys.executable, "benchmarks/time_to_accuracy.py", scan_bin, "--archs", "rel_uni_transformer",
                            "--updates", "20", "--runs", tmp_path / "runs", "--out", tmp_path / "other", "--", *TINY],
                           cwd=REPO, env=env, capture_output=True, text=True)
    assert again.returncode == 2 and again.stderr.strip().endswith(
        "rel_uni_transformer_s1/train.log holds an earlier measurement: expected a new --out and --runs (or remove "
        "it)"), again.stderr
    assert {f: f.read_bytes() for f in before} == before and not (tmp_path / "other.json").exists()


def test_sweep_cost_scales_the_measured_step_to_each_recipes_budget(tmp_path, scan_bin):
    """benchmarks/sweep_cost.py: the sweep's own training command for a few updates, then the budget: --max-update
    (csordas/scan: 50,000) or --max-epoch x updates per epoch (chaabouni/scan: 250 epochs; 200 examples in
    batches of 16 make 13 updates an epoch), times the planned seeds."""
    import sweep_cost
    import yaml

    tiny = " ".join(TINY[:-3]) + " --num-workers 0"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({
        "name": "cost", "seeds": [1, 2, 3],
        "datasets": {"scan": {"data": str(scan_bin), "subsets": ["gen"], "recipe": "csordas/scan"}},
        "configurations": {
            "csordas": {"arch": "compgen_transformer_scan", "flags": f"{tiny} --batch-size 16"},
            "chaabouni": {"arch": "chaabouni_transformer_scan", "flags": f"{tiny} --batch-size 16 --max-update 0",
                          "recipes": {"csordas/scan": "chaabouni/scan"}}}}))
    out = tmp_path / "cost.json"
    assert sweep_cost.main([str(tmp_path / "s.yaml"), "--cpu", "--threads", "1", "--updates", "4", "--log-every", "2",
                            "--json", str(out)]) == 0
    rows = {r["config"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["csordas"]["budget_updates"] == 50_000 and rows["csordas"]["seeds"] == 3
    assert rows["chaabouni"]["updates_per_epoch"] == 13 and rows["chaabouni"]["budget_updates"] == 250 * 13
    for r in rows.values():
        assert r["measured_updates"] == 4 and r["s_per_update"] >= 0
        assert r["hours"] == r["s_per_update"] * r["budget_updates"] * 3 / 3600


def _train_step(*args, json_out):
    """benchmarks/train_step.py ARGS --json JSON_OUT on one thread: (the finished process, the JSON it wrote)."""
    p = subprocess.run([sys.executable, "benchmarks/train_step.py", *map(str, args), "--json", str(json_out)], cwd=REPO,
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p, json.loads(json_out.read_text())


def test_train_step_measures_a_previous_commit_in_the_same_rounds(tmp_path):
    """benchmarks/train_step.py --previous: each arch also built by an earlier commit's package (git archive through
    PYTHONPATH), paired in each round; that package, not the installed one, built it (checked by the script); a bad
    commit is one line naming the flag."""
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    out = tmp_path / "ts.json"
    tiny = ["--steps", "1", "--warmup", "0", "--batch", "2", "--src-len", "4", "--tgt-len", "4"]
    p, d = _train_step("--previous", "HEAD", "--rounds", "2", "--archs", "compgen_transformer", *tiny, json_out=out)
    (row,) = d["rows"]
    assert d["previous"] == row["previous"]["commit"] == head
    assert row["package"] == str((REPO / "fairseq_compgen").resolve())  # this tree's package for the current arm
    assert len(row["previous"]["time_ratios"]) == 2 and row["previous"]["params"] == row["params"]
    assert "x prev" in p.stdout
    root = p.stdout.split("its package under ", 1)[1].split()[0]
    assert "train_step_prev_" in root and not Path(root).exists()  # the exported package is removed afterwards

    bad = subprocess.run([sys.executable, "benchmarks/train_step.py", "--previous", "no-such-commit", "--archs",
                          "compgen_transformer", *tiny], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.strip().splitlines() == [
        f"train_step.py: --previous no-such-commit: not a commit of {REPO}"], bad.stderr


def test_train_step_stock_reference_takes_the_archs_dropouts_only_when_asked():
    """benchmarks/train_step.py's stock transformer: the arch's size always; fairseq's dropouts (attention and
    activation 0) by default, the arch's (Csordás: 0.1 each) with --stock-dropouts."""
    import train_step

    from fairseq_compgen.models.standalone import build_model

    ours = build_model("compgen_transformer", src_words=8, tgt_words=8)
    for dropouts, expected in [(False, (0.1, 0.0, 0.0)), (True, (0.1, 0.1, 0.1))]:
        stock = train_step.stock_model(ours.encoder.args, 8, dropouts)
        layer = stock.encoder.layers[0]
        assert (layer.dropout_module.p, layer.self_attn.dropout_module.p, layer.activation_dropout_module.p) == expected
        assert layer.fc1.weight.shape == ours.encoder.stack.layers[0].ffn.fc1.weight.shape


def test_saved_tensors_counts_per_module_without_parameters():
    """benchmarks/saved_tensors.py on a tiny model: every byte charged to a module class, parameters not counted;
    our dropouts keep their scaled float masks (modules/dropout.py), charged to Dropout."""
    import torch
    from saved_tensors import saved_per_module

    from fairseq_compgen.models.standalone import build_model

    model = build_model("compgen_transformer", src_words=8, tgt_words=8, encoder_layers=1, decoder_layers=1)
    src, tgt = torch.randint(4, 12, (2, 5)), torch.randint(4, 12, (2, 6))
    per_module, per_tensor = saved_per_module(model, src, tgt)
    assert sum(per_module.values()) == sum(per_tensor.values()) > 0
    assert {"MultiheadAttention", "LayerNorm", "Dropout", "loss"} <= set(per_module)
    assert {dtype for module, dtype, _ in per_tensor if module == "Dropout"} == {"float32"}
    fc2 = model.encoder.stack.layers[0].ffn.fc2.weight  # what F.linear keeps of a parameter is the parameter itself
    assert ("FeedForward", "float32", tuple(fc2.shape)) not in per_tensor


def test_softmax_benchmark_writes_both_kernels_per_row_length(tmp_path):
    """benchmarks/softmax.py on tiny tensors: one row per (dtype, length) with both kernels' times and their ratio,
    the machine and the register size the module uses, written to --json."""
    out = tmp_path / "softmax.json"
    p = subprocess.run([sys.executable, "benchmarks/softmax.py", "--lengths", "3", "20", "--dtypes", "float32",
                        "bfloat16", "--elements", "600", "--calls", "2", "--rounds", "1", "--json", str(out)],
                       cwd=REPO, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr
    record = json.loads(out.read_text())
    assert [(r["dtype"], r["K"], r["rows"]) for r in record["rows"]] == [
        ("float32", 3, 200), ("float32", 20, 30), ("bfloat16", 3, 200), ("bfloat16", 20, 30)]
    for r in record["rows"]:
        assert r["fwd_torch_us"] > 0 and r["fwdbwd_composite_us"] > 0
        assert abs(r["fwdbwd_ratio"] - r["fwdbwd_torch_us"] / r["fwdbwd_composite_us"]) < 1e-9
    assert record["machine"]["threads"] == 1 and record["register_bytes"] in (0, 32, 64)
    assert p.stdout.count("\n| float32 |") == 2


def test_train_step_decode_times_greedy_decoding_of_a_fixed_length(tmp_path):
    """benchmarks/train_step.py --decode: fairseq's greedy SequenceGenerator holds every hypothesis to exactly
    --tgt-len tokens and EOS (the same decoding steps for every arch); the rows say what was timed; --stock-dropouts,
    meaningless without dropout, is refused in one line."""
    import torch
    import train_step

    from fairseq_compgen.models.standalone import build_model

    model = build_model("rel_uni_transformer", src_words=8, tgt_words=8, encoder_layers=1, decoder_layers=1,
                        encoder_embed_dim=16, decoder_embed_dim=16).eval()
    hyps = train_step.greedy_decoder(model, 7)(torch.randint(4, 12, (3, 5)), torch.full((3,), 5))
    eos = model.decoder.dictionary.eos()
    assert [h[0]["tokens"].tolist()[-1] for h in hyps] == [eos] * 3
    assert all(len(h[0]["tokens"]) == 8 and eos not in h[0]["tokens"][:-1].tolist() for h in hyps)

    out = tmp_path / "decode.json"
    tiny = ["--steps", "1", "--warmup", "0", "--batch", "2", "--src-len", "4", "--tgt-len", "5"]
    p, d = _train_step("--decode", "--archs", "compgen_transformer", *tiny, json_out=out)
    assert d["timed"] == "decode" and "decode ms" in p.stdout and "greedy decoding of one batch" in p.stdout
    (row,) = d["rows"]
    assert row["arch"] == "compgen_transformer" and row["step_ms"] > 0 and row["ref_step_ms"] > 0
    bad = subprocess.run([sys.executable, "benchmarks/train_step.py", "--decode", "--stock-dropouts"], cwd=REPO,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].endswith(
        "--stock-dropouts has no effect with --decode: no dropout at evaluation")

    # --beam-stop-bound: each arch's bound search against fairseq's beam search of the same width, the same steps
    for bound in (False, True):
        hyps = train_step.greedy_decoder(model, 7, beam=3, bound=bound)(torch.randint(4, 12, (3, 5)), torch.full((3,), 5))
        assert all(len(h) == 3 and {len(x["tokens"]) for x in h} == {8} for h in hyps)
    p, d = _train_step("--decode", "--beam", "2", "--beam-stop-bound", "--archs", "compgen_transformer", *tiny,
                       json_out=out)
    (row,) = d["rows"]
    assert d["beam"] == 2 and row["reference"] == "fairseq" and row["beam_stop_bound"] and row["step_ms"] > 0
    assert "beam search (beam 2) of one batch" in p.stdout and "x fairseq" in p.stdout
    bad = subprocess.run([sys.executable, "benchmarks/train_step.py", "--beam", "4"], cwd=REPO, capture_output=True,
                         text=True)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].endswith(
        "--beam and --beam-stop-bound time decoding: add --decode")
