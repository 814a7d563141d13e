#!/usr/bin/env bash
# One idempotent setup: a Python 3.11 venv in .venv with torch, then this package (editable) with its `dev` extra;
# pyproject.toml declares every dependency (fairseq-fixed included). Second run: only checks, seconds.
#
#   TORCH_SPEC       the torch to install first (default torch==2.13.0: the CPU build on this machine's disk)
#   TORCH_INDEX_URL  optional index for that torch alone, e.g. a CUDA build index from pytorch.org (INSTALL.md)
#
# Why torch first: a torch requirement that pip resolves on its own takes PyPI's default build (CUDA, several GB).
# Why --no-build-isolation: fairseq-fixed builds from its sdist on Python 3.11 (Cython + torch C++ extensions) and
# lists torch as a build requirement; in an isolated build pip installs a second, CUDA torch (about 5 GB with its
# nvidia-* wheels) into a throwaway build environment. Without isolation it builds against the torch, numpy and
# cython installed here. See INSTALL.md and ../shared/notes/fairseq-host.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Ready when: this pyproject.toml and TORCH_SPEC are the ones last installed (stamp), every requirement of
# fairseq_compgen[dev] is installed at a matching version, this checkout is the editable install, and fairseq imports.
# (python -I: the checkout itself is not on sys.path, so a stale fairseq_compgen.egg-info there cannot answer.)
stamp=.venv/.compgen-setup
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $TORCH_SPEC ${TORCH_INDEX_URL:-}"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && versions=$(python -I - 2>/dev/null <<'PY'
import importlib.metadata as md
import json
import pathlib
import urllib.parse
from packaging.requirements import Requirement

seen, todo = set(), [("fairseq_compgen", frozenset({"dev"}))]
while todo:
    name, extras = todo.pop()
    if (name, extras) in seen:
        continue
    seen.add((name, extras))
    for line in md.distribution(name).requires or []:  # PackageNotFoundError if not installed
        req = Requirement(line)
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            continue
        assert not req.specifier or req.specifier.contains(md.version(req.name), prereleases=True), req
        todo.append((req.name, frozenset(req.extras)))
url = json.loads(md.distribution("fairseq_compgen").read_text("direct_url.json"))
where = pathlib.Path(urllib.parse.unquote(urllib.parse.urlparse(url["url"]).path)).resolve()
assert url["dir_info"].get("editable") and where == pathlib.Path.cwd().resolve(), url
import fairseq, torch  # noqa: E401

print("torch", torch.__version__, "fairseq", fairseq.__version__)
PY
); then
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
