"""Packaging: pyproject.toml builds a wheel that carries everything the package reads at run time, exposes the one
`fairseq-compgen` console script, leaves tests/ out, and the installed environment is consistent (`pip check`).

The wheel is built offline (no index, no build isolation) from a copy of the sources in a temporary folder, so the
test neither writes build/ or *.egg-info into the checkout nor needs the network: it takes a few seconds.
"""
from __future__ import annotations

import email
import importlib
import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib  # Python >= 3.11
except ImportError:  # Python 3.10, which pyproject allows: the same parser as the `tomli` package (dev extra)
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "fairseq_compgen"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
BUILD_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in", "README.md")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")


def _source_files() -> set:
    """The package's files as the wheel should hold them (posix paths relative to the repository root)."""
    return {p.relative_to(REPO).as_posix() for p in PACKAGE.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_FILES:
        if (REPO / name).exists():
            shutil.copy2(REPO / name, src / name)
    for folder in ("fairseq_compgen", "tests"):  # tests/ goes in too: the wheel must leave it out
        shutil.copytree(REPO / folder, src / folder, ignore=IGNORE)
    out = tmp_path_factory.mktemp("wheel")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(out), str(src)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("fairseq_compgen-*.whl")
    with zipfile.ZipFile(whl) as z:
        yield z


def _dist_info(z: zipfile.ZipFile, name: str) -> str:
    (path,) = [n for n in z.namelist() if n.endswith(f".dist-info/{name}")]
    return z.read(path).decode()


def test_wheel_holds_every_package_file_and_no_tests(wheel):
    names = set(wheel.namelist())
    missing = sorted(_source_files() - names)
    assert not missing, f"not in the wheel: {missing}"
    sweeps = [n for n in names if n.startswith("fairseq_compgen/sweeps/") and n.endswith(".yaml")]
    assert sweeps, "no sweep files (fairseq_compgen/sweeps/*.yaml) in the wheel"
    tops = {n.split("/")[0] for n in names}
    assert tops == {"fairseq_compgen", next(t for t in tops if t.endswith(".dist-info"))}, tops
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_wheel_metadata_and_the_one_console_script(wheel):
    entry_points = _dist_info(wheel, "entry_points.txt")
    scripts = [line.strip() for line in entry_points.split("[console_scripts]", 1)[1].split("[", 1)[0].splitlines()
               if line.strip()]
    assert scripts == ["fairseq-compgen = fairseq_compgen.cli:main"], scripts
    meta = email.message_from_string(_dist_info(wheel, "METADATA"))
    import fairseq_compgen

    assert meta["Name"] == "fairseq_compgen" and meta["Version"] == fairseq_compgen.__version__ == "0.1.0"
    assert meta["Requires-Python"] == ">=3.10"
    requires = meta.get_all("Requires-Dist")
    assert "fairseq-fixed==0.12.3.1" in requires, requires
    assert set(meta.get_all("Provides-Extra")) == {"mt", "plots", "tb", "slurm", "dev"}


def test_console_scripts_point_to_callables():
    scripts = PYPROJECT["project"]["scripts"]
    assert set(scripts) == {"fairseq-compgen"}
    for target in scripts.values():
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr)), target
    installed = {ep.name: ep for ep in md.entry_points(group="console_scripts") if ep.module.startswith("fairseq_compgen")}
    assert set(installed) == set(scripts), "installed console scripts differ from pyproject.toml: rerun scripts/setup.sh"
    assert callable(installed["fairseq-compgen"].load())


def test_dev_extra_is_pytest_plus_every_other_extra():
    extras = PYPROJECT["project"]["optional-dependencies"]

    def expand(name):
        out = set()
        for req in extras[name]:
            if req.startswith("fairseq_compgen["):
                for sub in req[len("fairseq_compgen["):-1].split(","):
                    out |= expand(sub.strip())
            else:
                out.add(req)
        return out

    others = set().union(*(expand(e) for e in extras if e != "dev"))
    assert expand("dev") >= others | {"pytest"}


def test_pip_check_is_clean():
    proc = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fairseq_and_the_plugin_do_not_import_torchaudio():
    """fairseq-fixed declares torchaudio, and pip installs PyPI's newest (2.11.0, a CUDA build that declares no torch
    version): beside torch 2.13 CPU it raises OSError on import. It is harmless only while nothing we run imports
    it: fairseq imports it in its speech code alone. (docs/installing.md says so.)"""
    code = ("import sys, fairseq, fairseq_compgen, fairseq_cli.train, fairseq_cli.generate\n"
            "fairseq_compgen.register()\n"
            "import fairseq_compgen.cli\n"
            "assert 'torchaudio' not in sys.modules, sorted(m for m in sys.modules if 'torchaudio' in m)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
