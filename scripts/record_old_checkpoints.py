"""Tiny checkpoints trained by an older fairseq_compgen, and their outputs: the fixture of
tests/test_old_checkpoints.py (checkpoints trained before the positions refactor, modules/positions/, still load
and give the same outputs).

    git archive 0880ec7 | tar -x -C /tmp/old          # the tree before the refactor
    PYTHONPATH=/tmp/old python scripts/record_old_checkpoints.py tests/fixtures/old_checkpoints

Trains each preset of ARCHS (1 layer, d 16) for 2 updates with fairseq-train on a tiny SCAN sample (joined
dictionary, so the copy decoder works), keeps checkpoint_last.pt without optimizer state and the dictionaries,
and records the log-probabilities of the loaded model on fixed inputs (expected.pt).
"""
import random
import shutil
import sys
import tempfile
from pathlib import Path

import torch

ARCHS = ["compgen_transformer_scan", "rel_uni_transformer_scan", "sag_t5_transformer_scan", "ontanon_rel2_eb_c"]
TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
        "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2").split()
PAD = 1


def inputs(dictionary):
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, len(dictionary), (2, 6), generator=g)
    src[0, :2] = PAD  # left padding
    prev = torch.randint(4, len(dictionary), (2, 5), generator=g)
    prev[:, 0] = 2
    return src, src.ne(PAD).sum(1), prev


def outputs(path: Path, data: Path) -> torch.Tensor:
    """Log-probabilities of the checkpoint's model (loaded by fairseq's loader, eval mode) on `inputs`."""
    from fairseq import checkpoint_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(path)], arg_overrides={"data": str(data), "source_lang": "src", "target_lang": "tgt"})
    model = models[0].eval()
    src, lengths, prev = inputs(task.source_dictionary)
    with torch.no_grad():
        return model.get_normalized_probs(model(src, lengths, prev), log_probs=True).clone()


def main(out: str):
    import fairseq_compgen
    from fairseq_cli import train
    from fairseq_compgen.data.binarize import prepare_split
    from fairseq_compgen.data.scan import build_split

    fairseq_compgen.register()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="old-checkpoints-") as tmp:  # not OUT/work: OUT may hold a folder of that name
        work = Path(tmp)
        data = build_split("length_cutoff_26")
        rng = random.Random(0)
        small = {"train": rng.sample(data["train"], 64), "valid": data["valid"][:8], "gen": data["gen"][:8]}
        prepare_split("tiny SCAN", work / "scan", small, joined=True, dict_from="all")
        bin_dir = work / "scan" / "bin"
        for name in ("dict.src.txt", "dict.tgt.txt"):
            shutil.copy(bin_dir / name, out / name)
        expected = {}
        for arch in ARCHS:
            save = work / arch
            sys.argv = ["fairseq-train", str(bin_dir), "--user-dir", str(Path(fairseq_compgen.__file__).parent),
                        "--task", "compgen", "--arch", arch, *TINY, "--optimizer", "adam", "--lr", "1e-3",
                        "--batch-size", "32", "--cpu", "--max-update", "2", "--save-dir", str(save), "--num-workers",
                        "0", "--disable-validation", "--no-epoch-checkpoints", "--no-save-optimizer-state"]
            train.cli_main()
            shutil.copy(save / "checkpoint_last.pt", out / f"{arch}.pt")
            expected[arch] = outputs(out / f"{arch}.pt", out)
        torch.save(expected, out / "expected.pt")


if __name__ == "__main__":
    main(*sys.argv[1:])
