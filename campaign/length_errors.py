"""Whether wrong hypotheses have the wrong length, and how, from the decoded outputs a run keeps (eval/SUBSET.outputs.gz).

    python campaign/length_errors.py results/campaign/positions_length --subset valid
    python campaign/length_errors.py results/campaign/positions_length --subset gen --within 26 --out /tmp/gen.md

For each run (DIR/<dataset>/<config>/seedK/eval/SUBSET.outputs.gz, SUBSET test by default) it counts the wrong
hypotheses (exact match, as fairseq-compgen score exact_match) and, among them, those longer than the reference,
shorter, and of its length; and two kinds of the longer and shorter ones: the whole reference followed by more tokens
(the decoder did not stop where it should have), and a strict beginning of the reference (it stopped too early;
with --within N, also how many of those stopped at N tokens or fewer, e.g. within the training set's lengths).
Length generalization asks for outputs longer than any seen in training, so a model can fail there by length alone,
and in distribution a decoder that cannot count its own repetitions writes too many or too few. One row per run, as a
markdown table (to --out through a temporary name, else to stdout). Reads files only; the reading and the table are
campaign/jump_errors.py's.
"""
import sys
from pathlib import Path
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jump_errors import cli, table, wrong_pairs  # noqa: E402

COLUMNS = (("longer", "longer"), ("shorter", "shorter"), ("same_length", "the reference's length"),
           ("overran", "the reference, then more"), ("stopped_early", "a beginning of the reference"))


def counts(path: Path, within: Optional[int] = None) -> dict:
    """n, wrong, and of the wrong: longer, shorter and as long as the reference (in tokens); the reference followed by
    more tokens; a strict beginning of the reference, and (with `within`) such a beginning of at most `within`
    tokens."""
    n, pairs = wrong_pairs(path)  # token lists
    early = [len(h) for h, r in pairs if len(h) < len(r) and r[:len(h)] == h]
    c = {"n": n, "wrong": len(pairs),
         "longer": sum(len(h) > len(r) for h, r in pairs),
         "shorter": sum(len(h) < len(r) for h, r in pairs),
         "same_length": sum(len(h) == len(r) for h, r in pairs),
         "overran": sum(len(h) > len(r) and h[:len(r)] == r for h, r in pairs),
         "stopped_early": len(early)}
    if within is not None:
        c["early_within"] = sum(length <= within for length in early)
    return c


def length_table(a, command: str) -> str:
    columns = COLUMNS + ((("early_within", f"a beginning, at most {a.within} tokens"),) if a.within is not None else ())
    return table(a.folder, a.subset, command, lambda p: counts(p, a.within), columns,
                 f"Wrong {a.subset} hypotheses and their length")


def options(p) -> Callable:
    p.add_argument("--within", type=int, metavar="N",
                   help="also the share of wrong hypotheses that are a beginning of the reference of at most N tokens "
                        "(e.g. the longest output in training: stopped within the lengths it saw)")
    return lambda a: "" if a.within is None else f" --within {a.within}"


def main(argv=None) -> int:
    return cli(argv, __doc__.split("\n\n")[0], "length_errors.py", length_table, options)


if __name__ == "__main__":
    sys.exit(main())
