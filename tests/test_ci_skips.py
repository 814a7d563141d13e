"""tests/ci_skips.py: under CI=true a skip fails the run and is listed; without CI it is a skip as usual."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _pytest(tmp_path, ci, *args):
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "def test_ok():\n    assert True\n"
        "def test_needs_data():\n    pytest.skip('shared data not found: /nowhere')\n")
    env = dict(os.environ, PYTHONPATH=str(TESTS), CI="true" if ci else "")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "ci_skips", *args,
                           str(tmp_path / "test_x.py")], cwd=tmp_path, env=env, capture_output=True, text=True)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_skip_fails_under_ci(tmp_path, workers):
    """Also with scripts/test.sh's two pytest-xdist workers: the skips reach the controller's session."""
    p = _pytest(tmp_path, True, *workers)
    assert p.returncode == 1, p.stdout
    assert "CI=true: 1 test(s) skipped" in p.stdout and "shared data not found: /nowhere" in p.stdout


def test_a_skip_is_a_skip_without_ci(tmp_path):
    p = _pytest(tmp_path, ci=False)
    assert p.returncode == 0 and "1 skipped" in p.stdout and "CI=true" not in p.stdout, p.stdout
