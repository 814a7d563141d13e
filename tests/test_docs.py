"""The documentation points only at what exists, and its commands work as written: every link and anchor between
README.md and docs/*.md, every repository path they name, and every command line they show.

The command lines are those of the shell (and unlabelled) code blocks and of the inline code whose program is
`fairseq-compgen`, `fairseq-train`, `fairseq-generate`, `fairseq-interactive`, `python -m fairseq_compgen...`, `python scripts/X.py`,
`python benchmarks/X.py` or `python campaign/X.py`. Each is run in this process by the program's own entry point,
and stopped once its own argparse parser has read the command line (`_stop_after_parsing`), so an option, a choice
or a value of the wrong type that the program does not take fails the test with the file and line; a module or
script that does not exist fails too. Beyond parsing:
  * `fairseq-compgen train ...` runs with `--dry-run` (it prints the fairseq-train command and runs nothing) and the
    printed command is parsed by fairseq's training parser for its arch: the recipe and the arch must exist, and
    every fairseq-train option after SAVE is checked;
  * `fairseq-compgen recipes ...` and `fairseq-compgen help ...` only print: they run to the end and must exit 0;
  * the sweep a `fairseq-compgen sweep` command names must load (`sweep_schema.load_spec`; a path such as
    `campaign/X.yaml` is read from the repository's root, where the docs' commands run). A sweep's `--dry-run`
    is parsed only: it needs the sweep's data folders prepared. The `python -m fairseq_compgen.pipelines.sweep
    sweeps/X.yaml` of docs/results.md record how earlier runs were started: their options are checked.

How a command is read, and the placeholders:
  * in a code block, `#` starting a word begins a comment: prose, not read (a command quoted there is not checked);
  * a command ends at `;`, `&&`, `||`, a pipe ` | `, a redirection `<` `>`, or the end of its line (a backslash
    continues it) or of its inline code (which may wrap lines);
  * `[...]` starting and ending a word is an optional part: the brackets are dropped and its content checked;
    alternatives inside one (`[--a X | --b Y]`) or within one word (`exact_match|bleu|comp`) are checked one by one;
  * a shell variable (`$split`, `${arch}`) takes the first value of its `for VAR in ...` loop in the same block;
  * `...` stands for words left out, and a subcommand alone (`fairseq-compgen eval` in a sentence) names it: such a
    sketch is checked only for its option names, not for values or missing arguments;
  * other upper-case words (DATA, CHECKPOINT, SPLIT_DIR, ...) are the reader's own paths and values: the parser
    gets them as written (nothing is opened while parsing). Where a registered name is needed, a stand-in: ARCH is
    `compgen_transformer` (STAND_INS); a prep dataset that is a placeholder (DATASET) or the reader's own file
    (`./toy.py`) is a one-file dataset with no options of its own, so only the options every dataset has pass.
(The plain-PyTorch example runs in tests/test_models.py.)"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence
from unittest import mock

import pytest

from docs_helpers import REPO, doc_files

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
    heading = "Mixed precision on CPU (`--autocast-bf16`, float16)"
    assert slug(heading) == "mixed-precision-on-cpu---autocast-bf16-float16"
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
    token = re.sub(r"(\.py)::?\w+$", r"\1", token.rstrip(".,;:"))  # file.py:function, a pytest id file.py::test
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


@dataclass
class Command:
    """One documented command line: where it is, its program and its words after the program."""
    doc: str
    line: int
    program: str  # fairseq-compgen, fairseq-train, fairseq-generate, fairseq-interactive, python -m MODULE, python PATH.py
    argv: List[str]
    sketch: bool  # words left out (`...`, or a program or subcommand named alone): only option names are checked

    def __str__(self):
        return f"{self.doc}:{self.line}: {self.program} {shlex.join(self.argv)}".rstrip()


FENCE = re.compile(r"^ *```(\w*)\n(.*?)^ *```", flags=re.S | re.M)
SHELL = ("bash", "sh", "")  # the blocks read as shell: not python
PROGRAM = re.compile(r"(?<![\w./-])(fairseq-compgen|fairseq-train|fairseq-generate|fairseq-interactive|python -m fairseq_compgen(?:\.\w+)*|"
                     r"python (?:scripts|benchmarks|campaign)/\w+\.py)(?![\w.-])")
END = re.compile(r";|&&|\|\||\s\|\s|\s[<>]+\s")  # what ends a command: a list operator, a pipe, a redirection
TICKED_SPAN = re.compile(r"`([^`]+)`")  # inline code, which may wrap lines
OPTIONAL = re.compile(r"(?<!\S)\[([^\[\]]*)\](?!\S)")  # [--scan-dir DIR], a bracket starting and ending a word
STAND_INS = {"ARCH": "compgen_transformer"}
FAIRSEQ = ("fairseq-train", "fairseq-generate", "fairseq-interactive")  # fairseq's own programs: only parse


def _code(text: str):
    """(offset, code) of every shell or unlabelled block and inline code span of a documentation file's text, the
    code as long as the text it comes from (so offsets give line numbers): line continuations, comments and an
    inline span's line breaks turned into spaces; shell variables replaced by the first value of their block's
    `for VAR in ...` loop."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group())

    for m in FENCE.finditer(text):
        if m.group(1) not in SHELL:
            continue
        body = re.sub(r"(?<!\S)#[^\n]*", blank, re.sub(r"\\\n", "  ", m.group(2)))
        first = dict(re.findall(r"\bfor (\w+) in (\S+)", body))
        yield m.start(2), re.sub(r"\$\{?(\w+)\}?", lambda v: first.get(v.group(1), v.group()), body)
    for m in TICKED_SPAN.finditer(FENCE.sub(blank, text)):
        if "\n\n" not in m.group(1):
            yield m.start(1), m.group(1).replace("\n", " ")


def _variants(words: str) -> List[List[str]]:
    """The word lists a command's text stands for: each optional part [...] with its content, each alternative of
    one (`[--a X | --b Y]`) or of one word (`exact_match|bleu|comp`) on its own."""
    m = OPTIONAL.search(words)
    if m:
        return [v for alt in m.group(1).split(" | ")
                for v in _variants(words[:m.start()] + alt + words[m.end():])]
    argv = shlex.split(words)
    for i, w in enumerate(argv):
        if "|" in w and all(re.fullmatch(r"[\w.-]+", part) for part in w.split("|")):
            return [v for part in w.split("|") for v in _variants(shlex.join(argv[:i] + [part] + argv[i + 1:]))]
    return [argv]


def documented_commands() -> List[Command]:
    """Every command line of README.md and docs/*.md whose program PROGRAM matches (rules: the module docstring)."""
    out = []
    for doc in doc_files():
        text = doc.read_text(encoding="utf-8")
        for offset, code in _code(text):
            for m in PROGRAM.finditer(code):
                rest = code[m.end():].split("\n", 1)[0]
                end = END.search(OPTIONAL.sub(lambda o: "x" * len(o.group()), rest))  # ` | ` in [...]: alternatives
                line = text.count("\n", 0, offset + m.start()) + 1
                try:
                    variants = _variants(rest[:end.start()] if end else rest)
                except ValueError as e:  # an unclosed quote
                    variants = [[f"<unreadable: {e}>"]]
                for argv in variants:
                    words = argv[1:] if m.group(1) == "fairseq-compgen" else argv
                    alone = all(_placeholder(w) for w in words)  # a program or subcommand named, or its synopsis
                    if m.group(1) in FAIRSEQ:  # without a data folder: the program or one of its options named
                        alone = alone or words[0].startswith("-")
                    sketch = "..." in argv or alone
                    out.append(Command(doc.name, line, m.group(1), [w for w in argv if w != "..."], sketch))
    return out


def _placeholder(word: str) -> bool:
    """A word the reader replaces: DATA, CHECKPOINT, SPLIT_DIR, $var, <subset>."""
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_]*", word)) or any(c in word for c in "$<>")


class _Parsed(BaseException):  # not an Exception: no `except Exception` of a command catches it
    """The command's own parser accepted its command line: the command goes no further."""

    def __init__(self, namespace):
        super().__init__()
        self.namespace = namespace


@contextlib.contextmanager
def _stop_after_parsing(sketch: bool):
    """The first `ArgumentParser.parse_args` parses (a sketch: only checks that its option names exist), then
    raises _Parsed."""
    real = argparse.ArgumentParser.parse_args

    def parse_args(self, args=None, namespace=None):
        if not sketch:
            raise _Parsed(real(self, args, namespace))
        words = sys.argv[1:] if args is None else list(args)
        named = [w.split("=")[0] for w in words if re.match(r"--?[A-Za-z]", w)]  # not -1, a negative value
        unknown = [w for w in named if w not in self._option_string_actions]
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        raise _Parsed(None)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_args):
        yield


def _entry(program: str):
    """The function a program runs (it reads sys.argv); ImportError or FileNotFoundError if it does not exist."""
    if program == "fairseq-compgen":
        from fairseq_compgen.cli import main
        return main
    if program in FAIRSEQ:
        from fairseq import options

        import fairseq_compgen

        fairseq_compgen.register()  # what `--user-dir fairseq_compgen` does, unless the package was imported before
        make = {"fairseq-train": options.get_training_parser, "fairseq-generate": options.get_generation_parser,
                "fairseq-interactive": options.get_interactive_generation_parser}[program]
        return lambda: options.parse_args_and_arch(make())
    name = program.split()[-1]
    if program.startswith("python -m "):
        return importlib.import_module(name).main
    path = REPO / name
    if not path.is_file():
        raise FileNotFoundError(f"no such script: {name}")
    spec = importlib.util.spec_from_file_location(f"documented_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    with mock.patch.object(sys, "path", [str(path.parent), *sys.path]):  # as `python DIR/X.py` puts DIR first
        spec.loader.exec_module(module)
    return module.main


def _invoke(program: str, argv: Sequence[str], parse_only: bool, sketch: bool = False):
    """(exit status, stdout, stderr, parsed namespace or None) of `program argv` in this process."""
    out, err, ns = io.StringIO(), io.StringIO(), None
    stop = _stop_after_parsing(sketch) if parse_only else contextlib.nullcontext()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            mock.patch.object(sys, "argv", [program, *argv]), stop:
        try:
            rc = _entry(program)()
        except _Parsed as parsed:
            rc, ns = 0, parsed.namespace
        except SystemExit as e:
            rc = e.code
        except Exception as e:  # a UsageError, an unknown module or script, ...
            rc, err = 1, io.StringIO(f"{type(e).__name__}: {e}")
    return (0 if rc is None else rc), out.getvalue(), err.getvalue(), ns


def check(cmd: Command, toy_dataset: Path) -> Optional[str]:
    """Why the documented command does not work as written, or None (how: the module docstring)."""
    argv = [STAND_INS.get(w, w) for w in cmd.argv]
    compgen = cmd.program == "fairseq-compgen"
    sub = argv[0] if compgen and argv else None
    if sub == "prep" and len(argv) > 1 and (_placeholder(argv[1]) or argv[1].endswith(".py")):
        argv[1] = str(toy_dataset)
    if cmd.program in FAIRSEQ and cmd.sketch:  # what fairseq's parsers need to know their options: data, task, arch
        needed = {"--task": "compgen", "--arch": "compgen_transformer"} if cmd.program == "fairseq-train" else {
            "--task": "compgen"}
        data = [] if argv and not argv[0].startswith("-") else ["DATA"]
        argv = data + argv + [w for k, v in needed.items() if k not in argv for w in (k, v)]
    if sub == "train" and not cmd.sketch:  # its own options, then fairseq-train's for the arch it trains
        rc, out, err, _ = _invoke(cmd.program, [*argv, "--dry-run"], parse_only=False)
        if rc == 0:
            words = shlex.split(out.strip().splitlines()[-1])
            rc, out, err, _ = _invoke(words[0], words[1:], parse_only=True)
    else:
        runs = sub in ("recipes", "help")  # they only print
        rc, out, err, ns = _invoke(cmd.program, argv, parse_only=not runs, sketch=cmd.sketch)
        if rc == 0 and sub == "sweep" and ns is not None and not _placeholder(ns.sweep):
            from fairseq_compgen.pipelines.sweep_schema import load_spec

            # a sweep file of this repository (campaign/X.yaml) is named from the checkout's root
            in_repo = REPO / ns.sweep
            try:
                load_spec(in_repo if not Path(ns.sweep).exists() and in_repo.is_file() else ns.sweep)
            except Exception as e:
                rc, err = 1, f"{type(e).__name__}: {e}"
    if rc != 0:
        said = [line for line in err.strip().splitlines() if line.strip()]
        return f"{cmd}: exit {rc}: {said[-1][:300] if said else '(nothing on stderr)'}"
    return None


def test_documented_commands_are_read():
    """The reader above sees the documentation's commands, at their lines: each program, each subcommand, and the
    rules of the module docstring."""
    cmds = documented_commands()
    assert len(cmds) > 100
    assert {c.program.split("/")[0] for c in cmds} >= {"fairseq-compgen", "fairseq-train", "fairseq-generate", "fairseq-interactive",
                                                       "python -m fairseq_compgen.data.cfq_im", "python scripts",
                                                       "python benchmarks"}
    assert {c.argv[0] for c in cmds if c.program == "fairseq-compgen" and c.argv} >= {
        "prep", "recipes", "train", "eval", "sweep", "aggregate", "score", "help", "plot", "--help"}
    lines = {doc.name: doc.read_text(encoding="utf-8").split("\n") for doc in doc_files()}
    assert not [str(c) for c in cmds if c.program.split()[0] not in lines[c.doc][c.line - 1]]
    text = {f"{c.doc}: {c.program} {shlex.join(c.argv)}" for c in cmds}
    # a continued line; a loop variable; an optional part; alternatives; a comment not read; sketches
    assert ("experiments.md: fairseq-compgen train --cpu --recipe ontanon/cogs_tagging "
            "ontanon_tagging_rel_eb_small_2s_attention data/ontanon/cogs-tagging runs/tag_s1 --seed 1") in text
    assert ("experiments.md: fairseq-compgen train --recipe chaabouni/scan chaabouni_transformer_scan "
            "data/scan/addprim_jump/bin runs/chaabouni/addprim_jump/chaabouni_transformer/s0 --seed 0") in text
    assert "data.md: fairseq-compgen prep scan --split around_right --out data/scan --scan-dir DIR" in text
    assert {"data.md: fairseq-compgen prep cfq --split mcd1 --out data/cfq --cfq-tarball cfq1.1.tar.gz",
            "data.md: fairseq-compgen prep cfq --split mcd1 --out data/cfq --preprocessed-dir DIR"} <= text
    assert {"experiments.md: fairseq-compgen score exact_match GENERATE_LOG",
            "experiments.md: fairseq-compgen score bleu GENERATE_LOG"} <= text
    assert not [t for t in text if t.startswith("experiments.md: fairseq-compgen train /")]  # `# the ... train / eval`
    assert [c.sketch for c in cmds if c.doc == "README.md" and c.line == 7] == [True]  # fairseq-train DATA ... ...
    named = [c.sketch for c in cmds if c.program == "fairseq-compgen" and c.argv == ["eval"]]  # `fairseq-compgen eval`
    assert named and all(named)


def test_every_documented_command_works_as_written(tmp_path, monkeypatch):
    """Every documented command is accepted by its program's own parser (a train command through its --dry-run and
    fairseq's training parser); `recipes` and `help` run; what each names exists (see the module docstring)."""
    toy = tmp_path / "toy.py"
    toy.write_text("from fairseq_compgen.data.dataset import Dataset\nDATASET = Dataset(read=lambda args: {})\n")
    work = tmp_path / "cwd"
    work.mkdir()
    bad = []
    for cmd in documented_commands():
        # fairseq's own commands only parse, from the repository root (README: `--user-dir fairseq_compgen` works
        # there); ours run in an empty folder, which a command that went further than parsing would write into
        monkeypatch.chdir(REPO if cmd.program in FAIRSEQ else work)
        bad.append(check(cmd, toy))
    bad = [b for b in bad if b]
    assert not bad, "\n".join(bad)
    assert not list(work.iterdir()), "a documented command wrote files: it went further than parsing its options"


def test_a_wrong_option_fails_with_file_and_line(tmp_path):
    """The check above fails on a documented option, recipe, sweep, arch, module or script that does not exist,
    naming the file and line."""
    wrong = [("fairseq-compgen", "train --recipe csordas/scan ARCH DATA SAVE --no-such"),
             ("fairseq-compgen", "train --recipe no/such ARCH DATA SAVE"),
             ("fairseq-compgen", "eval CHECKPOINT DATA --no-such"),
             ("fairseq-compgen", "sweep no_such_sweep"),
             ("fairseq-compgen", "help no_such_arch"),
             ("fairseq-train", "DATA --task compgen --arch compgen_transformer --no-such"),
             ("python benchmarks/train_step.py", "--no-such"),
             ("python scripts/no_such.py", ""),
             ("python -m fairseq_compgen.no_such", "")]
    for program, words in wrong:
        message = check(Command("x.md", 7, program, words.split(), sketch=False), tmp_path / "toy.py")
        assert message and message.startswith(f"x.md:7: {program} {words}".rstrip() + ": exit "), message
    sketch = Command("x.md", 7, "fairseq-compgen", ["eval", "--no-such"], sketch=True)
    assert "--no-such" in check(sketch, tmp_path / "toy.py")
    assert check(Command("x.md", 7, "fairseq-compgen", ["eval", "--cpu"], sketch=True), tmp_path / "toy.py") is None


def test_every_run_recorded_on_an_uncommitted_tree_is_named_in_the_readme():
    """A run whose done.json says "dirty" (trained on a tree with uncommitted edits) is labelled in the README by its
    folder, so no such number passes for a clean one."""
    import json

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    dirty = [p.parent.relative_to(REPO).as_posix() for p in sorted((REPO / "results").rglob("done.json"))
             if json.loads(p.read_text()).get("dirty")]
    assert dirty  # the ones named there
    assert [d for d in dirty if f"`{d}`" not in readme] == []


def test_every_shipped_sweep_says_how_to_prepare_each_dataset(tmp_path, monkeypatch):
    """Each dataset of fairseq_compgen/sweeps/*.yaml and of the campaign's campaign/*.yaml has a `prep:` command (what
    a missing data folder's refusal shows, and what `sweep --prep` runs to rerun a cell with another seed): every
    `fairseq-compgen prep` in it is accepted by prep's own parser, and the last one's output folder
    (--out, or russin's SPLIT_DIR) holds the dataset's `data`."""
    from fairseq_compgen.pipelines.sweep_schema import SWEEPS, load_spec

    monkeypatch.chdir(tmp_path)
    bad, seen = [], 0
    sweeps = sorted(SWEEPS.glob("*.yaml")) + sorted((REPO / "campaign").glob("*.yaml"))
    assert len(sweeps) > len(list(SWEEPS.glob("*.yaml")))
    for sweep in sweeps:
        for name, dataset in load_spec(sweep)["datasets"].items():
            where = f"{sweep.name}: {name}"
            if not dataset["prep"]:
                bad.append(f"{where}: no prep")
                continue
            out = None
            for part in dataset["prep"].split("&&"):
                words = shlex.split(part)
                if words[:2] != ["fairseq-compgen", "prep"]:
                    bad.append(f"{where}: {part.strip()!r} is not a fairseq-compgen prep command")
                    continue
                why = check(Command(sweep.name, 0, "fairseq-compgen", words[1:], False), tmp_path / "toy.py")
                bad += [f"{where}: {why}"] if why else []
                out = words[words.index("--out") + 1] if "--out" in words else words[3]
                seen += 1
            if out and not Path(dataset["data"]).is_relative_to(out):
                bad.append(f"{where}: data {dataset['data']} is not under the prep's output {out}")
    assert seen >= 20 and not bad, "\n".join(bad)
    assert not list(tmp_path.iterdir()), "a prep command went further than parsing its options"
