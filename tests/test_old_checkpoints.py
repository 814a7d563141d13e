"""Checkpoints trained before the positions refactor (modules/positions/) still load, with fairseq's own loader, and
give the outputs they gave then. The fixture (tests/fixtures/old_checkpoints/) was written by
scripts/record_old_checkpoints.py running the tree of commit 0880ec7: tiny presets of every position family then
(sinusoidal, Transformer-XL, T5 bias, Ontañón's rel-eb in self- and cross-attention with the copy decoder)."""
import importlib.util
from pathlib import Path

import pytest
import torch

import fairseq_compgen

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/fixtures/old_checkpoints"
EXPECTED = torch.load(FIXTURE / "expected.pt", weights_only=True)

spec = importlib.util.spec_from_file_location("record_old_checkpoints", ROOT / "scripts/record_old_checkpoints.py")
recorder = importlib.util.module_from_spec(spec)
spec.loader.exec_module(recorder)
fairseq_compgen.register()


def test_every_recorded_family_is_there():
    assert sorted(EXPECTED) == sorted(recorder.ARCHS)


@pytest.mark.parametrize("arch", recorder.ARCHS)
def test_old_checkpoint_loads_and_gives_the_same_outputs(arch):
    now = recorder.outputs(FIXTURE / f"{arch}.pt", FIXTURE)
    diff = (now - EXPECTED[arch]).abs().max().item()
    assert diff <= 1e-6, f"{arch}: a checkpoint from before the refactor now gives outputs {diff} away"
