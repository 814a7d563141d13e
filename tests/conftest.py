import random
import sys
from pathlib import Path

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
