import os
import random
import sys
from pathlib import Path

# Before anything imports torch: the suite's models are tiny, so one thread per process, and OpenMP threads wait
# passively. With OpenMP's default busy-waiting and 2 threads, a machine shared with another process made single
# tests up to 60x slower (a greedy-verdict test: 202 s in a loaded CI run, 3.4 s passive, 1.8 s on one thread).
# Tests that need other settings pass their own environment to their subprocesses.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
pytest_plugins = ["ci_skips"]  # under CI=true a skipped test fails the run (tests/ci_skips.py)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def scan_bin(tmp_path_factory):
    """A small SCAN length-cutoff-26 sample (200 train, 24 valid, 24 gen), binarized."""
    from fairseq_compgen.data.binarize import prepare_split
    from fairseq_compgen.data.scan import build_split

    data = build_split("length_cutoff_26")
    rng = random.Random(0)
    small = {"train": rng.sample(data["train"], 200), "valid": data["valid"][:24], "gen": data["gen"][:24]}
    split = tmp_path_factory.mktemp("scan") / "tiny"
    prepare_split("tiny SCAN", split, small, dict_from="all")
    return split / "bin"
