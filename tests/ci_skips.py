"""A pytest plugin (loaded by conftest.py): under CI=true a skipped test fails the run.

Locally a test may skip when the shared datasets (../shared/data) or an extra (submitit, ...) are missing; CI has
both, so there a skip means a test that did not run while the run looked green. With CI=true every skip, at
collection or at run time (pytest.skip, a skipif mark, a module-level skip), and every expected failure (xfail) is
listed with its reason and the exit status becomes 1 (when nothing else failed).
The test command (scripts/test.sh) also prints pytest's skip summary (-rs) in every run."""
import os

import pytest

_skipped = []


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (file, line, "Skipped: reason")
        return str(longrepr[2])
    return str(longrepr)


def pytest_collectreport(report):
    if report.skipped:
        _skipped.append((report.nodeid, _reason(report)))


def pytest_runtest_logreport(report):
    if report.skipped:  # pytest.skip, a skipif mark, or an expected failure (xfail): none of them checked anything
        reason = f"xfail: {report.wasxfail}" if hasattr(report, "wasxfail") else _reason(report)
        _skipped.append((report.nodeid, reason))


def pytest_sessionfinish(session, exitstatus):
    if not (_ci() and _skipped):
        return
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"CI=true: {len(_skipped)} test(s) skipped; under CI a skip (missing data or extra) fails the run:"]
    lines += [f"  {nodeid}: {reason}" for nodeid, reason in _skipped]
    for line in lines:
        tr.write_line(line) if tr is not None else print(line)
    if exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
