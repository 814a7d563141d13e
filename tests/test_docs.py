"""The documentation points only at what exists (issue 25): every link and anchor between README.md and docs/*.md,
every repository path it names, and every `fairseq-compgen` subcommand, sweep, recipe and arch its commands name.
(The prep commands' options are parsed by tests/test_data_prep.py; the plain-PyTorch example runs in
tests/test_models.py.)"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from docs_helpers import REPO, code_blocks, doc_files

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
TICKED = re.compile(r"`([^`\n]+)`")
# path prefixes that name files of this repository (package-relative ones are looked up under fairseq_compgen/)
ROOTS = ("fairseq_compgen/", "scripts/", "benchmarks/", "results/", "campaign/", "tests/", "docs/", ".ci/")
PACKAGE = ("models/", "modules/", "tasks/", "criterions/", "scoring/", "pipelines/", "recipes/", "sweeps/", "prep/")


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_slug_follows_github():
    assert slug("Mixed precision on CPU (`--autocast-bf16`, issue 22)") == "mixed-precision-on-cpu---autocast-bf16-issue-22"
    assert slug("The `compgen` task") == "the-compgen-task"


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.name)
def test_links_and_anchors_resolve(doc):
    bad = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with that anchor in {dest.name}")
    assert not bad, f"{doc.name}: " + "; ".join(bad)


def _expand(token: str):
    """`modules/{a,b}.py` -> modules/a.py, modules/b.py (one level of braces)."""
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [token[:m.start()] + part + token[m.end():] for part in m.group(1).split(",")]


def _repo_path(token: str):
    """The repository path a backticked token names, or None if it names none (a command, a placeholder, a run
    output such as runs/x or eval/<subset>.json)."""
    if " " in token or any(c in token for c in "<>*$") or "..." in token:
        return None
    token = re.sub(r"(\.py):\w+$", r"\1", token.rstrip(".,;:"))  # file.py:function
    if token.startswith(ROOTS):
        return REPO / token
    if token.startswith(PACKAGE) or re.fullmatch(r"data/\w+\.py", token):
        return REPO / "fairseq_compgen" / token
    return None


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.name)
def test_named_repository_paths_exist(doc):
    text = doc.read_text(encoding="utf-8")
    missing = sorted({t for tok in TICKED.findall(text) for t in _expand(tok)
                      if (p := _repo_path(t)) is not None and not p.exists() and not p.with_suffix("").exists()})
    assert not missing, f"{doc.name} names files that do not exist: {', '.join(missing)}"


def _commands():
    """(file, argv after `fairseq-compgen`) of every command line of the bash blocks and inline code."""
    for doc in doc_files():
        text = doc.read_text(encoding="utf-8")
        chunks = code_blocks(text) + TICKED.findall(text)
        for chunk in chunks:
            chunk = re.sub(r"\\\n", " ", chunk)
            for line in chunk.split("\n"):
                line = re.sub(r"\[[^\]]*\]", "", re.sub(r"#.*", "", line))
                for m in re.finditer(r"fairseq-compgen ([^;&|`]*)", line):
                    try:
                        argv = shlex.split(m.group(1))
                    except ValueError:
                        continue
                    if argv:
                        yield doc.name, argv


def _placeholder(word: str) -> bool:
    return not re.fullmatch(r"[a-z0-9_./-]+", word) or "..." in word


def test_every_documented_command_names_what_exists():
    from fairseq.models import ARCH_MODEL_REGISTRY

    import fairseq_compgen

    fairseq_compgen.register()  # the archs (imported before fairseq, the package registers nothing by itself)
    from fairseq_compgen import recipes
    from fairseq_compgen.cli import COMMANDS

    sweeps = {p.stem for p in (REPO / "fairseq_compgen" / "sweeps").glob("*.yaml")}
    known_recipes = set(recipes.names())
    bad, seen = [], 0
    for doc, argv in _commands():
        sub, rest = argv[0], argv[1:]
        if sub.startswith("-") or _placeholder(sub):
            continue
        seen += 1
        if sub not in COMMANDS:
            bad.append(f"{doc}: fairseq-compgen {sub}: no such subcommand")
            continue
        for i, word in enumerate(rest):
            if word == "--recipe" and i + 1 < len(rest) and not _placeholder(rest[i + 1]):
                if rest[i + 1] not in known_recipes:
                    bad.append(f"{doc}: --recipe {rest[i + 1]}: no such recipe")
        positional = [w for i, w in enumerate(rest) if (w == "-" or not w.startswith("-")) and (i == 0 or rest[i - 1] != "--recipe")
                      and not (i > 0 and rest[i - 1].startswith("--") and rest[i - 1] not in ("--dry-run", "--cpu"))]
        first = positional[0] if positional else None
        if first is None or _placeholder(first) or first == "-":
            continue
        if sub == "sweep" and "/" not in first and first not in sweeps:
            bad.append(f"{doc}: fairseq-compgen sweep {first}: no such sweep file in fairseq_compgen/sweeps/")
        if sub == "recipes" and first not in known_recipes:
            bad.append(f"{doc}: fairseq-compgen recipes {first}: no such recipe")
        if sub in ("train", "help") and first not in ARCH_MODEL_REGISTRY:
            bad.append(f"{doc}: fairseq-compgen {sub} {first}: no such arch")
    assert seen > 50, f"only {seen} documented commands found: the parser of this test no longer sees them"
    assert not bad, "\n".join(bad)
