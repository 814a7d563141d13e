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
        "def test_needs_data():\n    pytest.skip('shared data not found: /nowhere')\n"
        "@pytest.mark.skipif(True, reason='no submitit')\ndef test_needs_extra():\n    assert False\n"
        "@pytest.mark.xfail(reason='known bug')\ndef test_known_bug():\n    assert False\n")
    (tmp_path / "test_y.py").write_text("import pytest\npytest.skip('no fairseq here', allow_module_level=True)\n")
    env = dict(os.environ, PYTHONPATH=str(TESTS), CI="true" if ci else "")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "ci_skips", *args,
                           str(tmp_path / "test_x.py"), str(tmp_path / "test_y.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_skip_fails_under_ci(tmp_path, workers):
    """A run-time skip, a skipif mark, an xfail and a module-level skip each fail the run under CI, listed with their
    reasons; also with scripts/test.sh's two pytest-xdist workers: the skips reach the controller's session."""
    p = _pytest(tmp_path, True, *workers)
    assert p.returncode == 1, p.stdout
    assert "CI=true: 4 test(s) skipped" in p.stdout, p.stdout
    for reason in ("shared data not found: /nowhere", "no submitit", "xfail: known bug", "no fairseq here"):
        assert reason in p.stdout, (reason, p.stdout)


def test_a_skip_is_a_skip_without_ci(tmp_path):
    p = _pytest(tmp_path, ci=False)
    assert p.returncode == 0 and "3 skipped" in p.stdout and "1 xfailed" in p.stdout, p.stdout
    assert "CI=true" not in p.stdout
