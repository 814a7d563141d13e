"""Ontañón et al.'s configuration with every new mechanism at once (rel2-eb position encodings in self- and
cross-attention, copy decoder) through the real commands: fairseq-compgen prep algorithmic, fairseq-train, fairseq-generate."""
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="2", PATH=f"{BIN}:{os.environ['PATH']}")
    p = subprocess.run([str(c) for c in cmd], cwd=REPO, env=env, capture_output=True, text=True)
    assert p.returncode == 0, f"{cmd[0]} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout + p.stderr


def test_rel2_eb_copy_decoder_trains_and_generates(tmp_path):
    run([sys.executable, "-m", "fairseq_compgen.cli", "prep", "algorithmic", "--out", tmp_path / "alg", "--tasks", "reverse",
         "--train-size", "1000", "--test-size", "60", "--joined-dictionary"])
    data = tmp_path / "alg" / "reverse" / "bin"
    log = run([BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen",
               "--arch", "ontanon_rel2_eb_c", "--cpu", "--max-update", "10", "--batch-size", "64",
               "--optimizer", "adam", "--lr", "1e-3", "--criterion", "cross_entropy", "--valid-subset", "valid,test",
               "--save-dir", tmp_path / "run", "--log-format", "simple", "--num-workers", "0"])
    for subset in ("valid", "test"):
        assert re.search(rf"valid on '{subset}' subset .*\| accuracy [0-9.]+ \| tf_accuracy [0-9.]+ .*num_updates 10", log)
    out = run([BIN / "fairseq-generate", data, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen",
               "--path", tmp_path / "run" / "checkpoint_last.pt", "--gen-subset", "test", "--beam", "1",
               "--min-len", "0", "--max-len-b", "30", "--batch-size", "16", "--cpu"])
    assert len(re.findall(r"^H-\d+\t", out, flags=re.M)) == 60
