"""Keep the decoded outputs of campaign runs recorded before outputs were kept: eval/<subset>.outputs.gz beside each
recorded result, made from the fairseq-generate output that the state folder still holds.

    python campaign/keep_outputs.py                  # ../campaign/runs against results/campaign/, then one commit
    python campaign/keep_outputs.py --no-commit      # write the files only

Since 2026-11-27 `fairseq-compgen eval` writes eval/<subset>.outputs.gz (the S-, T-, H- and D- lines of the decoding,
gzip; fairseq_compgen/pipelines/evaluate.py) and the campaign commits it with the run, so a metric can be counted
again, or the errors read, without the checkpoint (e.g. `fairseq-compgen aggregate --by-length`, for runs scored
before per_length was recorded). Runs recorded earlier have only eval/<subset>.json; where the state folder that
trained them is still here, its eval/<subset>.generate.txt is the output their result was scored from. For each
run under results/campaign/<sweep>/<dataset>/<config>/seedK/ and each of its eval/<subset>.json, the outputs file
is written when:
  * STATE/runs/<same run>/eval/<subset>.json is byte for byte the recorded one (the same evaluation: its checkpoint
    hash, counts and time), and <subset>.generate.txt lies beside it, no newer than that JSON (evaluation renames the
    output into place before it scores and writes the JSON; a newer output is a later decoding whose scoring failed);
  * exact match counted again from the kept lines gives the recorded n and correct (for an exact-match result).
Otherwise the result is named with the reason (an output that cannot be read or scored too) and left as it is.
Results whose outputs file is already committed are skipped; one written but not committed (a pass with
--no-commit, or one stopped before its commit) is committed by the next pass. The files are derived by this script
from the run's own output, never edited; the commit names the command.
"""
import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from campaign.carry import commit_paths, committed  # noqa: E402
from fairseq_compgen.data.io import atomic_write_gzip_text  # noqa: E402
from fairseq_compgen.errors import UsageError, read_json  # noqa: E402
from fairseq_compgen.pipelines.evaluate import OUTPUTS, outputs_text  # noqa: E402
from fairseq_compgen.scoring.exact_match import rescore  # noqa: E402

RESULTS = Path("results") / "campaign"  # relative to the repository


def keep(repo: Path, state: Path):
    """Write the outputs files that can be made; returns (written paths relative to repo, [(result, reason)] for
    results whose state-folder copy is another evaluation or does not give its counts, the number of results the
    state folder has no output for: runs trained elsewhere, or decoded before this machine's state folder)."""
    written, refused, absent = [], [], 0
    for result in sorted((repo / RESULTS).glob("*/*/*/seed*/eval/*.json")):
        rel = result.relative_to(repo / RESULTS)  # <sweep>/<dataset>/<config>/seedK/eval/<subset>.json
        if rel.parts[0] == "_carry":
            continue
        subset = result.stem
        dest = result.with_name(subset + OUTPUTS)
        if dest.exists():
            if not committed(repo, dest.relative_to(repo).as_posix()):  # written by a pass that did not commit
                written.append(dest.relative_to(repo))
            continue
        theirs = state / "runs" / rel
        generated = theirs.with_name(subset + ".generate.txt")
        if not theirs.is_file() or not generated.is_file():
            absent += 1
            continue
        if theirs.read_bytes() != result.read_bytes():
            refused.append((rel, f"{theirs} is not the recorded result (another evaluation)"))
            continue
        if generated.stat().st_mtime > theirs.stat().st_mtime:
            refused.append((rel, f"{generated} is newer than the result (a later decoding, not the one it scored)"))
            continue
        try:
            text = outputs_text(generated)
            recorded = read_json(result, "an evaluation result of fairseq-compgen eval")
            if "accuracy" in recorded and "correct" in recorded:  # exact match: the kept lines must give its counts
                rescore(text.splitlines(keepends=True), recorded, str(generated), str(result))
        except UsageError as e:  # an output that cannot be read or scored, or gives other counts: this result only
            refused.append((rel, str(e)))
            continue
        atomic_write_gzip_text(dest, text)
        written.append(dest.relative_to(repo))
    return written, refused, absent


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--state", type=Path, default=REPO.parent / "campaign",
                   help="the campaign's state folder (default: ../campaign beside this checkout)")
    p.add_argument("--no-commit", action="store_true", help="write the files, commit nothing")
    a = p.parse_args(argv)
    if not (a.state / "runs").is_dir():
        p.error(f"--state {a.state}: no runs/ folder there (expected the campaign's state folder)")
    written, refused, absent = keep(REPO, a.state)
    for rel, why in refused:
        print(f"keep_outputs: left {rel}: {why}")
    for path in written:
        print(f"keep_outputs: wrote {path}")
    runs = len({path.parent.parent for path in written})
    print(f"keep_outputs: {len(written)} outputs file(s) of {runs} run(s) written; left: {len(refused)} result(s) "
          f"named above, {absent} without their output in {a.state / 'runs'}")
    if written and not a.no_commit:
        commit_paths(REPO, [str(path) for path in written],
                     f"Campaign: the decoded outputs of {runs} run(s) recorded before outputs were kept "
                     f"(eval/<subset>{OUTPUTS}, {len(written)} files), from the state folder's fairseq-generate "
                     f"output of the same evaluations, by `python campaign/keep_outputs.py`")
    return 0


if __name__ == "__main__":
    from fairseq_compgen.errors import install_excepthook

    install_excepthook()
    sys.exit(main())
