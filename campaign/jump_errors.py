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
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fairseq_compgen.data.io import atomic_write_text  # noqa: E402
from fairseq_compgen.errors import UsageError  # noqa: E402
from fairseq_compgen.scoring import read_generate_output  # noqa: E402
from fairseq_compgen.scoring.exact_match import exact_match, parse_generate_output  # noqa: E402

ACTION = "I_JUMP"


def counts(path: Path) -> dict:
    """n, wrong, and of the wrong: fewer ACTION than the reference, no ACTION, the reference's length."""
    lines, name = read_generate_output(str(path))
    refs, hyps = parse_generate_output(lines, name)
    missing = sorted(set(refs) - set(hyps))
    if missing:
        raise UsageError(f"{name}: no hypothesis for {len(missing)} of {len(refs)} examples (e.g. id {missing[0]}): "
                         "expected the whole decoded subset")
    wrong = [i for i in refs if not exact_match(hyps[i], refs[i])]
    return {"n": len(refs), "wrong": len(wrong),
            "fewer": sum(hyps[i].count(ACTION) < refs[i].count(ACTION) for i in wrong),
            "none": sum(ACTION not in hyps[i] for i in wrong),
            "same_length": sum(len(hyps[i]) == len(refs[i]) for i in wrong)}


def table(folder: Path, subset: str) -> str:
    paths = sorted(folder.glob(f"*/*/seed*/eval/{subset}.outputs.gz"),
                   key=lambda p: (p.parts[-5], p.parts[-4], int(p.parts[-3][4:])))
    if not paths:
        raise UsageError(f"{folder}: no */*/seed*/eval/{subset}.outputs.gz: expected an exported table or a sweep "
                         "folder whose runs kept their outputs")
    out = [f"Wrong {subset} hypotheses and their {ACTION} actions (`python campaign/jump_errors.py {folder}`)", "",
           f"| run | wrong of n | fewer {ACTION} than the reference | no {ACTION} | the reference's length |",
           "|---|---|---|---|---|"]
    for p in paths:
        c = counts(p)
        share = (lambda k: f"{c[k] / c['wrong']:.2f}") if c["wrong"] else (lambda k: "-")
        out.append(f"| {'/'.join(p.parts[-5:-2])} | {c['wrong']:,} of {c['n']:,} | {share('fewer')} | "
                   f"{share('none')} | {share('same_length')} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="an exported table or sweep folder: <dataset>/<config>/seedK/eval/")
    p.add_argument("--subset", default="test")
    p.add_argument("--out", type=Path, help="write the table here (default: print it)")
    a = p.parse_args(argv)
    try:
        text = table(a.folder, a.subset)
    except (UsageError, FileNotFoundError) as e:
        print(f"jump_errors: error: {e}", file=sys.stderr)
        return 1
    if a.out:
        atomic_write_text(a.out, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
