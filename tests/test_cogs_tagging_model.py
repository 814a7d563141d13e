"""The COGS tagging model of Ontañón et al. (2022), "Making Transformers Solve Compositional Tasks", §4.5.1
(Section 4.5.1, Tables 5 and 12): the three parent heads against direct implementations, the 12 presets,
training with fairseq-train (fairseq-compgen train) and decoding + per-category scoring (fairseq-compgen eval)."""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from model_helpers import data_prep_script

import fairseq_compgen.models  # noqa: F401  (registers models and presets)
from fairseq_compgen.checkpoint_loading import load
from fairseq_compgen.data import cogs_tagging as ct
from fairseq_compgen.modules.parent_heads import (IGNORE, INVALID, NO_PARENT, AbsoluteParentHead,
                                                  AttentionParentHead, RelativeParentHead, build_parent_head)
from fairseq_compgen.modules.position_scorer import build_scorer

REPO = Path(__file__).resolve().parents[1]
COGS_DIR = REPO.parent / "shared" / "data" / "cogs"
needs_cogs = pytest.mark.skipif(not (COGS_DIR / "gen.tsv").exists(), reason=f"COGS not at {COGS_DIR}")


def _random_parents(B=6, S=9, seed=0):
    """[B, S] parents: a position other than i or -1; padding (IGNORE) after a random length."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, S + 1, (B,), generator=g)
    parent = torch.full((B, S), IGNORE)
    for b, n in enumerate(lengths.tolist()):
        for i in range(n):
            p = int(torch.randint(-1, n, (1,), generator=g))
            parent[b, i] = NO_PARENT if p == i else p
    return parent, lengths


@pytest.mark.parametrize("cls", [AbsoluteParentHead, RelativeParentHead, AttentionParentHead])
def test_parent_classes_round_trip(cls):
    parent, _ = _random_parents()
    head = cls(8, 9)
    classes = head.to_classes(parent)
    valid = parent != IGNORE
    assert (classes[~valid] == IGNORE).all()
    assert (head.to_parents(classes)[valid] == parent[valid]).all()


def test_parent_class_definitions():
    """Absolute: 0 = none, p + 1; relative: (p - i) + max_len - 1 with none = offset 0; attention: none = self."""
    parent = torch.tensor([[2, NO_PARENT, 0, IGNORE]])
    assert AbsoluteParentHead(4, 5).to_classes(parent).tolist() == [[3, 0, 1, IGNORE]]
    assert RelativeParentHead(4, 5).to_classes(parent).tolist() == [[2 + 4, 0 + 4, -2 + 4, IGNORE]]
    assert AttentionParentHead(4).to_classes(parent).tolist() == [[2, 1, 0, IGNORE]]
    # classes naming no token of the (batch) sentence are INVALID, and the rebuilt logical form then fails
    assert AbsoluteParentHead(4, 5).to_parents(torch.tensor([[5, 0]])).tolist() == [[INVALID, NO_PARENT]]
    assert RelativeParentHead(4, 5).to_parents(torch.tensor([[2, 4]])).tolist() == [[INVALID, NO_PARENT]]
    tags = ct.to_tags("A rose was helped by a dog .", "rose ( x _ 1 ) AND help . theme ( x _ 3 , x _ 1 ) AND "
                      "help . agent ( x _ 3 , x _ 6 ) AND dog ( x _ 6 )")
    tags.parent[2] = INVALID  # a token without a role: still an error, not silently "no parent"
    with pytest.raises(ct.TaggingError, match="names no token"):
        ct.from_tags("A rose was helped by a dog .", tags)
    # too few classes for a target: a clear error, not a silently clipped label
    with pytest.raises(ValueError, match="--tagger-max-len"):
        AbsoluteParentHead(4, 2).to_classes(torch.tensor([[2, NO_PARENT, 0]]))
    with pytest.raises(ValueError, match="--tagger-max-len"):
        RelativeParentHead(4, 2).to_classes(torch.tensor([[2, NO_PARENT, 0]]))
    with pytest.raises(ValueError, match="unknown --tagger-parent-head"):
        build_parent_head("pointer", 4, 5)


def test_attention_parent_head_with_rel_eb_matches_the_formula():
    """logits_ij = (q_i.k_j + q_i.r_c + b_c) / sqrt(d), c = clip(j - i, -16, 16), q = W_q x + b_q, k = W_k x + b_k
    (one head of size d, the code's 33 relative embeddings of size d and biases), padded keys -inf."""
    torch.manual_seed(0)
    d, B, S, R = 8, 2, 20, 16
    scorer = build_scorer("rel-eb", embed_dim=d, num_heads=1, causal=False, radius=R)
    head = AttentionParentHead(d, scorer=scorer)
    assert scorer.rel_embedding.shape == (2 * R + 1, d) and scorer.rel_bias.shape == (2 * R + 1,)
    x = torch.randn(B, S, d)
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[1, 15:] = True
    got = head(x, pad)
    q, k = head.query(x), head.key(x)
    want = torch.empty(B, S, S)
    for b in range(B):
        for i in range(S):
            for j in range(S):
                c = max(-R, min(R, j - i)) + R
                e = q[b, i] @ k[b, j] + q[b, i] @ scorer.rel_embedding[c] + scorer.rel_bias[c]
                want[b, i, j] = float("-inf") if pad[b, j] else e / math.sqrt(d)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
    plain = AttentionParentHead(d)
    plain.load_state_dict(head.state_dict(), strict=False)
    assert torch.allclose(plain(x, pad)[0], (q[0] @ k[0].T) / math.sqrt(d), atol=1e-5)


def _tiny_task(tmp_path, n=40):
    """The cogs_tagging task on the first n examples of each COGS subset (dictionaries of the full prep)."""
    from fairseq_compgen.tasks.cogs_tagging import CogsTaggingConfig, CogsTaggingTask

    full = tmp_path / "full"
    _prep(full)
    small = tmp_path / "small"
    small.mkdir()
    for f in full.iterdir():
        if f.name.startswith("."):  # the list of files prep wrote
            continue
        if f.name.startswith("dict."):
            shutil.copy(f, small / f.name)
        else:
            lines = f.read_text().split("\n")[:-1]
            (small / f.name).write_text("\n".join(lines[:n]) + "\n")
    return CogsTaggingTask.setup_task(CogsTaggingConfig(data=str(small))), small


def _prep(out):
    data_prep_script("cogs_tagging").main(["--out", str(out), "--cogs-dir", str(COGS_DIR)])


@needs_cogs
def test_presets_of_table_12_and_their_heads(tmp_path):
    """The 12 tagging columns build, with the encoder, sharing and parent head their names say."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    from fairseq_compgen.models.archs_ontanon import TAGGING_COLUMNS
    from fairseq_compgen.models.tagger import CompgenTaggerModel
    from fairseq_compgen.tasks.cogs_tagging import CogsTaggingCriterion

    task, _ = _tiny_task(tmp_path)
    task.load_dataset("valid")
    ds = task.dataset("valid")
    sample = ds.collater([ds[i] for i in range(8)])
    B, S = sample["net_input"]["src_tokens"].shape
    assert len(TAGGING_COLUMNS) == 12 and task.max_sentence_length == max(
        len(line.split()) for sub in ("train", "valid", "test", "gen")
        for line in (Path(task.cfg.data) / f"{sub}.src").read_text().split("\n")[:-1])
    counts = {}
    for col, (pos, layers, shared, parent) in TAGGING_COLUMNS.items():
        args = argparse.Namespace()
        ARCH_CONFIG_REGISTRY["ontanon_tagging_" + col.replace("-", "_")](args)
        model = CompgenTaggerModel.build_model(args, task)
        assert args.tagger_parent_head == parent and args.encoder_embed_dim == 64
        assert args.self_attn_pos == ("rel-eb" if pos == "rel-eb" else "none")
        assert len(model.encoder.stack.layers) == (1 if shared else layers)
        K = {"absolute": task.max_sentence_length + 1, "relative": 2 * task.max_sentence_length - 1,
             "attention": S}[parent]
        out = model(**sample["net_input"])
        assert out["parent"].shape == (B, S, K)
        has_rel = model.parent_head.__dict__["_modules"].get("scorer") is not None
        assert has_rel == (parent == "attention" and pos == "rel-eb")
        loss, size, _ = CogsTaggingCriterion(task)(model, sample)
        assert torch.isfinite(loss) and size == sample["ntokens"]
        counts[col] = sum(p.numel() for p in model.parameters())
    # the attention head of rel-eb adds its 33 relative embeddings of size 64 and 33 biases
    base = counts["rel-eb-small-2s-attention"] - counts["abs-small-2-attention"]
    enc = sum(p.numel() for p in CompgenTaggerModel.build_model(
        _preset("rel-eb-small-2s-attention"), task).encoder.parameters()) - sum(
        p.numel() for p in CompgenTaggerModel.build_model(_preset("abs-small-2-attention"), task).encoder.parameters())
    assert base - enc == 33 * 64 + 33


def _preset(col):
    from fairseq.models import ARCH_CONFIG_REGISTRY

    args = argparse.Namespace()
    ARCH_CONFIG_REGISTRY["ontanon_tagging_" + col.replace("-", "_")](args)
    return args


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


@needs_cogs
@pytest.mark.parametrize("head", ["absolute", "relative", "attention"])
def test_fairseq_train_fits_and_evaluate_scores_per_category(tmp_path, head):
    """fairseq-compgen train on 24 training sentences until they are memorized; fairseq-compgen eval decodes the same sentences
    (copied as the gen subset, with categories) and scores them: exact match 1, per category, every example."""
    _, small = _tiny_task(tmp_path, n=24)
    for f in ("src", "lf", *ct.FIELDS):  # gen := train, so a memorized model must score 1 there
        shutil.copy(small / f"train.{f}", small / f"gen.{f}")
    (small / "gen.cat").write_text("".join(f"cat{i % 3}\n" for i in range(24)))
    save = tmp_path / "ckpt"

    def train(updates):
        return subprocess.run(
            [sys.executable, "-m", "fairseq_compgen.cli", "train", "--cpu", f"ontanon_tagging_rel_eb_small_2s_{head}",
             str(small), str(save), "--lr", "3e-3", "--batch-size", "8", "--max-update", str(updates), "--valid-subset",
             "gen", "--num-workers", "0", "--seed", "1", "--log-interval", "40"],
            capture_output=True, text=True, env=_env(), timeout=600)

    first = train(240)
    assert first.returncode == 0, first.stderr[-3000:]
    command = (save / "command.txt").read_text()  # fairseq-compgen train picks the tagging task for a tagging folder
    assert "--task cogs_tagging " in command and "--criterion cogs_tagging " in command
    # a longer run of the same command resumes: the checkpoint holds the flags build_model filled in (--tagger-max-len
    # from the data, --tagger-parent-pos inherit), which the resume guard once took for another model and refused
    more = train(250)
    assert more.returncode == 0, more.stderr[-3000:]
    assert "@ 240 updates)" in more.stdout + more.stderr
    assert load(str(save / "checkpoint_last.pt"))["optimizer_history"][-1]["num_updates"] == 250
    ev = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "eval", str(save / "checkpoint_last.pt"),
                         str(small), "gen", "valid", "--cpu"], capture_output=True, text=True, env=_env(), timeout=600)
    assert ev.returncode == 0, ev.stderr[-3000:]
    gen = json.loads((save / "eval" / "gen.json").read_text())
    assert gen["n"] == 24 and gen["accuracy"] == 1.0, (save / "eval" / "gen.table.txt").read_text()
    assert {c: v["n"] for c, v in gen["per_category"].items()} == {"cat0": 8, "cat1": 8, "cat2": 8}
    log = (save / "eval" / "gen.generate.txt").read_text()
    assert "Tagged gen: 24 examples, exact match 1.0000, all tags right 1.0000" in log
    valid = json.loads((save / "eval" / "valid.json").read_text())  # unseen sentences: scored, not necessarily right
    text = (save / "eval" / "valid.generate.txt").read_text()
    hyps = [line for line in text.split("\n") if line.startswith("H-")]
    assert valid["n"] == len(hyps) == 24 and valid["per_category"] == {}
    # each H- line is the model's own prediction (its argmax tags, rebuilt here), not the reference: on these unseen
    # sentences some are wrong; the accuracy and the summary line are the share of H- lines equal to their T- line
    H = dict(re.findall(r"^H-(\d+)\t0\t(.*)$", text, flags=re.M))
    T = dict(re.findall(r"^T-(\d+)\t(.*)$", text, flags=re.M))
    assert H == _own_logical_forms(save / "checkpoint_last.pt", small, "valid") and H.keys() == T.keys()
    right = sum(H[i] == T[i] for i in T)
    assert right < 24 and valid["accuracy"] == pytest.approx(right / 24)
    assert f"Tagged valid: 24 examples, exact match {right / 24:.4f}, " in text


def _own_logical_forms(checkpoint, data, subset):
    """{id: the logical form rebuilt from the checkpoint's argmax tags ('' where they describe none)} of every
    example of `subset`, in one batch: the model's own predictions, computed here (not by the task's predict)."""
    from fairseq import checkpoint_utils

    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)],
                                                                      arg_overrides={"data": str(data)})
    task.load_dataset(subset)
    ds = task.dataset(subset)
    sample = ds.collater([ds[i] for i in range(len(ds))])
    with torch.no_grad():
        out = model.eval()(**sample["net_input"])
    parents = model.parent_head.to_parents(out["parent"].argmax(-1))  # [B, S]: positions, NO_PARENT or INVALID
    forms = {}
    for b, words in enumerate(sample["src_text"]):
        n = len(words.split())  # the sentence's tokens come first in its row
        tags = {"parent": parents[b, :n].tolist()}
        for f in ct.FIELDS[1:]:
            d = task.tag_dictionaries[f]
            tags[f] = ["" if d[i] == ct.EMPTY else d[i] for i in out[f][b, :n].argmax(-1).tolist()]
        try:
            forms[str(int(sample["id"][b]))] = ct.from_tags(words, ct.Tags(**tags))
        except ct.TaggingError:
            forms[str(int(sample["id"][b]))] = ""
    return forms


@needs_cogs
def test_tagging_task_and_decoder_name_missing_files(tmp_path):
    from fairseq_compgen.tasks.cogs_tagging import CogsTaggingConfig, CogsTaggingTask

    _, small = _tiny_task(tmp_path, n=4)
    (small / "dict.role.txt").unlink()
    with pytest.raises(FileNotFoundError, match="dict.role.txt.*fairseq-compgen prep cogs_tagging"):
        CogsTaggingTask.setup_task(CogsTaggingConfig(data=str(small)))
    from fairseq_compgen.tasks import cogs_tagging_generate

    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        cogs_tagging_generate.main([str(tmp_path / "missing.pt"), str(small)])


@needs_cogs
def test_empty_tags_as_padding_leaves_empty_tags_out_of_loss_and_metric(tmp_path):
    """--empty-tags-as-padding (a reading of the authors' code): empty tag targets become padding, so the loss
    skips them and tag_accuracy ignores what the model predicts there; by default they are a class like any other."""
    from fairseq_compgen.models.tagger import CompgenTaggerModel
    from fairseq_compgen.tasks.cogs_tagging import CogsTaggingConfig, CogsTaggingCriterion, CogsTaggingTask

    _, small = _tiny_task(tmp_path, n=16)
    tasks = {flag: CogsTaggingTask.setup_task(CogsTaggingConfig(data=str(small), empty_tags_as_padding=flag))
             for flag in (False, True)}
    samples = {}
    for flag, task in tasks.items():
        task.load_dataset("train")
        ds = task.dataset("train")
        samples[flag] = ds.collater([ds[i] for i in range(16)])
    cat = tasks[True].tag_dictionaries["category"]
    empty_default = samples[False]["target"]["category"] == cat.index(ct.EMPTY)
    assert empty_default.any()
    assert (samples[True]["target"]["category"][empty_default] == cat.pad()).all()
    assert (samples[True]["target"]["category"][~empty_default] == samples[False]["target"]["category"][~empty_default]).all()

    torch.manual_seed(0)
    model = CompgenTaggerModel.build_model(_preset("abs-small-2-attention"), tasks[True])
    sample = samples[True]
    S = sample["net_input"]["src_tokens"].size(1)

    class Oracle(torch.nn.Module):  # right where the target is a tag; CNOUN wherever it is empty (padding)
        parent_head = model.parent_head

        def forward(self, src_tokens, src_lengths):
            res = {}
            for f, t in sample["target"].items():
                if f == "parent":
                    res[f] = torch.nn.functional.one_hot(model.parent_head.to_classes(t).clamp(min=0), S).float()
                    continue
                d = tasks[True].tag_dictionaries[f]
                t = t.masked_fill(t == d.pad(), d.index("CNOUN") if f == "category" else d.index(ct.EMPTY))
                res[f] = torch.nn.functional.one_hot(t, len(d)).float()
            return res

    pred = tasks[True].predict(Oracle(), sample)
    assert all(ok for _, ok, _, _ in pred)  # CNOUN on empty-category tokens is not scored
    assert not any(lf == ref for (_, _, lf, _), ref in zip(pred, sample["lf"]))  # ... but it breaks the rebuilt form
    # the loss has no term for empty targets: changing the logits there changes nothing
    crit = CogsTaggingCriterion(tasks[True])
    out = model(**sample["net_input"])
    base = crit(type("M", (), {"__call__": lambda self, **kw: out, "parent_head": model.parent_head})(), sample)[0]
    noisy = dict(out)
    noisy["category"] = out["category"].masked_fill((sample["target"]["category"] == cat.pad()).unsqueeze(-1), 5.0)
    changed = crit(type("M", (), {"__call__": lambda self, **kw: noisy, "parent_head": model.parent_head})(), sample)[0]
    assert torch.allclose(base, changed)


@needs_cogs
def test_random_batches_draw_new_mixed_length_batches_every_epoch(tmp_path):
    """--random-batches: training batches are random sentences, a new draw per epoch (fairseq seeds the call with
    seed + epoch); validation subsets keep fairseq's equal-length batches."""
    from fairseq.data import data_utils

    from fairseq_compgen.tasks.cogs_tagging import CogsTaggingConfig, CogsTaggingTask

    _, small = _tiny_task(tmp_path, n=200)
    task = CogsTaggingTask.setup_task(CogsTaggingConfig(data=str(small), random_batches=True))
    task.load_dataset("train")
    task.load_dataset("valid")
    train, valid = task.dataset("train"), task.dataset("valid")
    orders = []
    for epoch in (1, 2, 1):
        with data_utils.numpy_seed(1 + epoch):
            orders.append(train.ordered_indices().tolist())
    assert sorted(orders[0]) == list(range(200)) and orders[0] != orders[1] and orders[0] == orders[2]
    assert not train.can_reuse_epoch_itr_across_epochs and valid.can_reuse_epoch_itr_across_epochs
    assert (valid.sizes[valid.ordered_indices()] == sorted(valid.sizes)).all()
    batches = [b for b in task.get_batch_iterator(train, max_sentences=64, seed=1, epoch=1).next_epoch_itr(shuffle=True)]
    assert sum(len(b["id"]) for b in batches) == 200
    assert any(len(set(train.sizes[b["id"].numpy()])) > 1 for b in batches)  # lengths mixed within a batch
