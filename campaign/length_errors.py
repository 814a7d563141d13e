"""Whether wrong hypotheses have the wrong length, and how, from the decoded outputs a run keeps (eval/SUBSET.outputs.gz).

    python campaign/length_errors.py results/campaign/positions_length --subset valid
    python campaign/length_errors.py results/campaign/positions_length --subset gen --out /tmp/gen_lengths.md

For each run (DIR/<dataset>/<config>/seedK/eval/SUBSET.outputs.gz, SUBSET test by default) it counts the wrong
hypotheses (exact match, as fairseq-compgen score exact_match) and, among them, those longer than the reference,
shorter, and of its length; and two kinds of the longer and shorter ones: the whole reference followed by more tokens
(the decoder did not stop where it should have), and a strict beginning of the reference (it stopped too early).
Length generalization asks for outputs longer than any seen in training, so a model can fail there by length alone,
and in distribution a decoder that cannot count its own repetitions writes too many or too few. One row per run, as a
markdown table (to --out through a temporary name, else to stdout). Reads files only; the reading and the table are
campaign/jump_errors.py's.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jump_errors import cli, table, wrong_pairs  # noqa: E402

COLUMNS = (("longer", "longer"), ("shorter", "shorter"), ("same_length", "the reference's length"),
           ("overran", "the reference, then more"), ("stopped_early", "a beginning of the reference"))


def counts(path: Path) -> dict:
    """n, wrong, and of the wrong: longer, shorter and as long as the reference (in tokens); the reference followed by
    more tokens; a strict beginning of the reference."""
    n, pairs = wrong_pairs(path)  # token lists
    return {"n": n, "wrong": len(pairs),
            "longer": sum(len(h) > len(r) for h, r in pairs),
            "shorter": sum(len(h) < len(r) for h, r in pairs),
            "same_length": sum(len(h) == len(r) for h, r in pairs),
            "overran": sum(len(h) > len(r) and h[:len(r)] == r for h, r in pairs),
            "stopped_early": sum(len(h) < len(r) and r[:len(h)] == h for h, r in pairs)}


def length_table(folder: Path, subset: str) -> str:
    return table(folder, subset, counts, COLUMNS, f"Wrong {subset} hypotheses and their length",
                 "campaign/length_errors.py")


def main(argv=None) -> int:
    return cli(argv, __doc__.split("\n\n")[0], length_table, "length_errors.py")


if __name__ == "__main__":
    sys.exit(main())
