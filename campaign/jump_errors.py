"""What SCAN-jump errors are made of, from the decoded outputs a run keeps (eval/test.outputs.gz).

    python campaign/jump_errors.py results/chaabouni_table3_jump              # every run of an exported table
    python campaign/jump_errors.py results/chaabouni_table3_jump --out results/chaabouni_table3_jump/jump_errors.md

On SCAN's add-primitive "jump" split (Lake & Baroni 2018) the test commands use "jump" in the compositions that
training held out. For each run (DIR/<dataset>/<config>/seedK/eval/SUBSET.outputs.gz, SUBSET test by default) it
counts the wrong hypotheses (exact match, as fairseq-compgen score exact_match) and, among them, those with fewer
I_JUMP actions than the reference, those with none, and those of the reference's length: a model that maps "jump"
to another action in new compositions writes no I_JUMP where the reference has them, at the right length. One row
per run, as a markdown table (to --out through a temporary name, else to stdout). Reads files only.
"""
import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fairseq_compgen.data.io import atomic_write_text  # noqa: E402
from fairseq_compgen.errors import UsageError  # noqa: E402
from fairseq_compgen.scoring import read_generate_output  # noqa: E402
from fairseq_compgen.scoring.exact_match import exact_match, parse_generate_output  # noqa: E402

ACTION = "I_JUMP"


def wrong_outputs(path: Path):
    """A run's kept outputs (or a fairseq-generate output) -> (n, ids of the wrong examples in order, references,
    hypotheses, the lines read, the name for messages), exact match as fairseq-compgen score exact_match; refuses
    outputs that miss an example. Shared with campaign/length_errors.py and campaign/search_errors.py."""
    lines, name = read_generate_output(str(path))
    refs, hyps = parse_generate_output(lines, name)
    missing = sorted(set(refs) - set(hyps))
    if missing:
        raise UsageError(f"{name}: no hypothesis for {len(missing)} of {len(refs)} examples (e.g. id {missing[0]}): "
                         "expected the whole decoded subset")
    return len(refs), [i for i in refs if not exact_match(hyps[i], refs[i])], refs, hyps, lines, name


def wrong_pairs(path: Path):
    """(n, [(hypothesis, reference) of each wrong example, as token lists]) of a run's kept outputs."""
    n, wrong, refs, hyps, _, _ = wrong_outputs(path)
    return n, [(hyps[i], refs[i]) for i in wrong]


def counts(path: Path) -> dict:
    """n, wrong, and of the wrong: fewer ACTION than the reference, no ACTION, the reference's length."""
    n, wrong = wrong_pairs(path)
    return {"n": n, "wrong": len(wrong),
            "fewer": sum(h.count(ACTION) < r.count(ACTION) for h, r in wrong),
            "none": sum(ACTION not in h for h, _ in wrong),
            "same_length": sum(len(h) == len(r) for h, r in wrong)}


COLUMNS = (("fewer", f"fewer {ACTION} than the reference"), ("none", f"no {ACTION}"),
           ("same_length", "the reference's length"))


def table(folder: Path, subset: str, command: str, count=counts, columns=COLUMNS, title: str = "") -> str:
    """One row per run under `folder` (<dataset>/<config>/seedK/eval/SUBSET.outputs.gz): its wrong hypotheses of n,
    and each column's share of them; `count(path)` gives n, wrong and each column's key; `command` (the one that made
    the table) heads it."""
    paths = sorted((p for p in folder.glob(f"*/*/seed*/eval/{subset}.outputs.gz")  # seedK: a sweep's run
                    if re.fullmatch(r"seed\d+", p.parts[-3])),  # (a copy such as seed1_old is not one)
                   key=lambda p: (p.parts[-5], p.parts[-4], int(p.parts[-3][4:])))
    if not paths:
        raise UsageError(f"{folder}: no */*/seed*/eval/{subset}.outputs.gz: expected an exported table or a sweep "
                         "folder whose runs kept their outputs")
    title = title or f"Wrong {subset} hypotheses and their {ACTION} actions"
    out = [f"{title} (`{command}`)", "",
           "| run | wrong of n | " + " | ".join(label for _, label in columns) + " |",
           "|---|---|" + "---|" * len(columns)]
    for p in paths:
        c = count(p)
        share = (lambda k: f"{c[k] / c['wrong']:.2f}") if c["wrong"] else (lambda k: "-")
        out.append(f"| {'/'.join(p.parts[-5:-2])} | {c['wrong']:,} of {c['n']:,} | "
                   + " | ".join(share(k) for k, _ in columns) + " |")
    return "\n".join(out) + "\n"


def cli(argv, description: str, prog: str, make_table, add_options=None) -> int:
    """The command line of this script and of campaign/length_errors.py: `add_options(parser)` adds a script's own
    options and returns a function of the parsed arguments giving them as they go into the command the table names;
    `make_table(args, command)` gives the table."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("folder", type=Path, help="an exported table or sweep folder: <dataset>/<config>/seedK/eval/")
    p.add_argument("--subset", default="test")
    p.add_argument("--out", type=Path, help="write the table here (default: print it)")
    own = add_options(p) if add_options else (lambda a: "")
    a = p.parse_args(argv)
    command = f"python campaign/{prog} {a.folder}{'' if a.subset == 'test' else ' --subset ' + a.subset}{own(a)}"
    try:
        text = make_table(a, command)
    except (UsageError, FileNotFoundError) as e:
        print(f"{prog.removesuffix('.py')}: error: {e}", file=sys.stderr)
        return 1
    if a.out:
        atomic_write_text(a.out, text)
    print(text, end="")
    return 0


def main(argv=None) -> int:
    return cli(argv, __doc__.split("\n\n")[0], "jump_errors.py", lambda a, command: table(a.folder, a.subset, command))


if __name__ == "__main__":
    sys.exit(main())
