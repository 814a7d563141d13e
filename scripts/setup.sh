#!/usr/bin/env bash
# One idempotent setup: a Python 3.11 venv in .venv with torch (CPU), fairseq-fixed and this plugin (editable).
# Second run: only checks, seconds. See ../shared/notes/fairseq-host.md for why each step is as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
if python - <<'PY' 2>/dev/null
import importlib.metadata as m, torch, fairseq, sacrebleu, pytest, matplotlib, sentencepiece, sacremoses, subword_nmt, tensorboardX  # noqa: F401
import fairseq_compgen  # noqa: F401
assert m.version("fairseq-fixed") == "0.12.3.1"
PY
then
  echo "setup: .venv is ready ($(python -c 'import torch, fairseq; print("torch", torch.__version__, "fairseq", fairseq.__version__)'))"
  exit 0
fi
# torch first: 2.13.0 CPU lies on this machine's disk; a bare 'torch' requirement would pull a multi-GB CUDA build.
pip install -q torch==2.13.0 "numpy<2.4" cython "setuptools<81" wheel
# fairseq's runtime dependencies, minus torchaudio (only imported by audio code).
pip install -q hydra-core==1.3.2 omegaconf==2.3.0 regex "sacrebleu>=2" tqdm bitarray cffi packaging scikit-learn pytest matplotlib sentencepiece sacremoses subword-nmt tensorboardX
# fairseq-fixed: fairseq main + the Python 3.11 dataclass fix; builds its Cython extensions against our torch/numpy.
pip install -q --no-deps --no-build-isolation fairseq-fixed==0.12.3.1
pip install -q --no-deps --no-build-isolation -e .
python -c 'import torch, fairseq, fairseq_compgen; print("setup: done, torch", torch.__version__, "fairseq", fairseq.__version__)'
