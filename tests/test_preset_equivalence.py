"""Every preset gives the outputs it gave before the positions refactor (modules/positions/), from the same weights.

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


def _bound(arch):
    """(the fixture's distance from today's function, the largest distance float32 rounding explains). The fixture
    holds float32 outputs from another machine (AMD EPYC); another CPU's kernels round differently (Intel Xeon: up
    to 1.9e-6 here, over the 1e-6 this test used to allow). So compare with the float64 value of today's code on the
    same weights, allowing 1e-6 plus 4 times this machine's own float32 error on this input. On most presets that
    error is about 1e-6; on linear_rms_uni_transformer_scan this input is ill-conditioned in float32 (today's float32
    output is 0.009 from the float64 one, the fixture 0.023), and the bound grows with it instead of failing on
    rounding."""
    now = RECORDER.record(arch)
    exact = RECORDER.record(arch, torch.float64)["lprobs"]
    rounding = (now["lprobs"].double() - exact).abs().max().item()
    return now, (FIXTURE[arch]["lprobs"].double() - exact).abs().max().item(), 1e-6 + 4 * rounding


@pytest.mark.parametrize("arch", sorted(FIXTURE))
def test_preset_outputs_and_keys_unchanged(arch, one_thread):
    now, diff, bound = _bound(arch)
    assert now["keys"] == FIXTURE[arch]["keys"], f"{arch}: state_dict keys or shapes changed (old checkpoints)"
    assert diff <= bound, f"{arch}: outputs differ from before the refactor by {diff} (rounding explains {bound})"


def test_the_bound_sees_a_change_of_mechanism(one_thread):
    """Another preset's function on the same weights and inputs (relative positions instead of sinusoids; RMS
    instead of L2 normalization) is far outside the bound: the tolerance for rounding does not hide a change.
    "Far": over 10 bounds. The RMS preset's bound is the widest and moves with the CPU: on AMD EPYC this input's
    float32 error is 0.023, the bound 0.091 and the change 1.81, 19.9 bounds (Intel Xeon: 0.009, about 50); the plain
    pair is over 200,000 bounds apart on both."""
    for recorded, other in (("rel_transformer", "compgen_transformer"),
                            ("linear_rms_uni_transformer_scan", "linear_l2_uni_transformer_scan")):
        exact = RECORDER.record(other, torch.float64)["lprobs"]
        _, _, bound = _bound(recorded)
        assert (FIXTURE[recorded]["lprobs"].double() - exact).abs().max().item() > 10 * bound, (recorded, other)
