#!/usr/bin/env bash
# One idempotent setup: a Python 3.11 venv in .venv with torch, then this package (editable) with its `dev` extra;
# pyproject.toml declares every dependency (fairseq-fixed included). Second run: only checks, seconds.
#
#   TORCH_SPEC       the torch to install first (default torch==2.13.0: the CPU build on this machine's disk)
#   TORCH_INDEX_URL  optional index for that torch alone, e.g. a CUDA build index from pytorch.org (docs/installing.md)
#
# Why torch first: a torch requirement that pip resolves on its own takes PyPI's default build (CUDA, several GB).
# Why --no-build-isolation: fairseq-fixed builds from its sdist on Python 3.11 (Cython + torch C++ extensions) and
# lists torch as a build requirement; in an isolated build pip installs a second, CUDA torch (about 5 GB with its
# nvidia-* wheels) into a throwaway build environment. Without isolation it builds against the torch, numpy and
# cython installed here. See docs/installing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Ready when this pyproject.toml and TORCH_SPEC are the ones last installed (the stamp), pip finds every installed
# requirement satisfied, and this checkout's package imports with fairseq (python -I: not from the current folder).
stamp=.venv/.compgen-setup
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $TORCH_SPEC ${TORCH_INDEX_URL:-}"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && pip check > /dev/null 2>&1 && versions=$(python -I -c '
import os, fairseq, fairseq_compgen, torch
assert os.path.dirname(os.path.dirname(os.path.abspath(fairseq_compgen.__file__))) == os.getcwd()
print("torch", torch.__version__, "fairseq", fairseq.__version__)' 2>/dev/null); then
  echo "setup: .venv is ready ($versions)"
  exit 0
fi
rm -f "$stamp"
# torch first; numpy and cython beside it because fairseq-fixed's build (below, without isolation) needs them.
pip install -q ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "$TORCH_SPEC"
pip install -q numpy cython "setuptools>=70.1"
pip install -q --no-build-isolation -e ".[dev]"
echo "$want" > "$stamp"
python -c 'import torch, fairseq, fairseq_compgen; print("setup: done, torch", torch.__version__, "fairseq", fairseq.__version__)'
