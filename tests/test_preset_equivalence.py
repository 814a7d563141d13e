"""Every preset gives the outputs it gave before issue 24's positions refactor, from the same weights.

The fixture was written at commit 0880ec7 by scripts/record_preset_outputs.py (weights filled from parameter
names, so they do not depend on the order modules are built in). Same state_dict keys and shapes also means
checkpoints trained before the refactor still load.
"""
import importlib.util
from pathlib import Path

import pytest
import torch

from model_helpers import compgen_archs

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = torch.load(ROOT / "tests/fixtures/preset_outputs.pt", weights_only=True)


def _recorder():
    spec = importlib.util.spec_from_file_location("record_preset_outputs", ROOT / "scripts/record_preset_outputs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RECORDER = _recorder()


def test_every_recorded_preset_still_exists():
    missing = sorted(set(FIXTURE) - set(compgen_archs()))
    assert not missing, f"presets recorded before the refactor are gone: {missing}"


@pytest.fixture
def one_thread():
    """The fixture was computed on one thread; with more, matrix products sum in another order and the
    log-probabilities move by up to ~1e-5 (seen with 2 threads), which is not a change of the model."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("arch", sorted(FIXTURE))
def test_preset_outputs_and_keys_unchanged(arch, one_thread):
    now = RECORDER.record(arch)
    assert now["keys"] == FIXTURE[arch]["keys"], f"{arch}: state_dict keys or shapes changed (old checkpoints)"
    diff = (now["lprobs"] - FIXTURE[arch]["lprobs"]).abs().max().item()
    assert diff <= 1e-6, f"{arch}: outputs differ from before the refactor by {diff}"
