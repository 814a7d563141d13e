"""`fairseq-compgen eval`: decode a checkpoint on each subset and score it, in this process.

    fairseq-compgen eval CHECKPOINT DATA [SUBSET ...] [--cpu] [--metric exact_match|bleu|cfq_sparql|comp|...]
        [--generate-flags "FLAGS"] [--out DIR] [--user-dir PLUGIN]

Default subsets: every binarized subset of DATA but train. For each subset it writes, into OUT (default: the
checkpoint's folder/eval for checkpoint_last.pt, the one a sweep evaluates and aggregate reads; the checkpoint's
folder/eval/STEM for any other, e.g. eval/checkpoint_best/ for checkpoint_best.pt): SUBSET.generate.txt
(fairseq-generate's output), SUBSET.table.txt and SUBSET.json (the scorer's result, with "checkpoint": the
checkpoint's file name in its run folder, "checkpoint_sha256", "generate_flags": the --generate-flags it decoded
with (as one shell-quoted string, "" for none), "metric", and "evaluated": the machine as `fairseq-compgen
train` records it, GPU included unless --cpu, the wall-clock seconds the subset took, a time the process was
stopped meanwhile included, and the process's CPU seconds, which such a pause does not count), SUBSET.outputs.gz
(the decoded
outputs the result was scored from: the S-, T-, H- and D- lines of SUBSET.generate.txt, and COGS tagging's E-, without
per-token scores or log lines, gzip, about 1/20 to 1/30 of its size; every scorer reads it as it reads the whole
output, e.g. `fairseq-compgen score exact_match eval/gen.outputs.gz`, so a metric can be computed again, or the
errors read, without the checkpoint: sweeps and the campaign keep it with the run's records), and prints one line.
A SUBSET.json there of another checkpoint (another name or content, or one that names none), or of this one by
another --metric or --generate-flags, is refused before anything is decoded, unless --overwrite. Every file is written under a temporary name and renamed; a failed evaluation leaves none behind
(the output of a decoding whose scoring failed stays, as SUBSET.generate.txt, to be looked at).
Decoding:
* seq2seq (task compgen): fairseq-generate, greedy (--beam 1), --min-len 0 (fairseq forbids EOS at the first step
  by default, which would give an empty prediction a second chance; Csordás et al.'s greedy decoding and the
  task's validation `accuracy` have no minimum length). Output length (length_limit): greedy decoding scored by
  exact match stops at the subset's longest reference + EOS (--max-len-b) and each batch at its own
  (--max-len-from-target): a longer output cannot be an exact match and greedy tokens do not depend on where
  decoding stops, so the exact matches are an unbounded decoding's, sooner (an untrained model that never emits EOS
  would otherwise decode to the limit). Any other decoding (a beam, sampling, --metric bleu or comp, or the user's
  own --max-len-a/-b) gets fairseq's limit or the user's, none read from the references: where outputs are cut
  changes which hypothesis a beam returns and what BLEU or COMP scores, so a limit from the references would let
  them choose (2026-11-29: a bound beam of 4 on a Linear Transformer found 1,530 exact matches with the
  references' limits and 1,089 with fairseq's). The record's "max_len" says which;
* COGS tagging (a `fairseq-compgen prep cogs_tagging` folder with <subset>.parent files): the compgen_tagger is decoded
  by fairseq_compgen.tasks.cogs_tagging_generate, which prints the same S/T/H format.
--generate-flags are added to fairseq-generate's (e.g. "--beam 5" for MT with --metric bleu: its scorer removes
subwords and detokenizes; with fairseq's own --remove-bpe it finds no subword marks and scores the Moses-tokenized
text as it is, and says so). A --beam
over 1 with exact_match or comp prints a note to stderr, unless the flags hold `--beam-stop bound`: fairseq's beam
search ends a sentence once that many hypotheses have ended, whatever their scores, which costs a confident model most
of its exact matches (BEAM_NOTE; tasks/beam_stop.py, the search that ends a sentence only when it is decided).
--user-dir PLUGIN imports the plugin folder a model was trained with (fairseq-train's --user-dir, e.g. one that
registers its own position encoding) before the checkpoint is loaded; a sweep passes its runs' own --user-dir.
Scoring: any scorer of fairseq_compgen/scoring/ (`fairseq-compgen score --help` lists them): exact_match (per
category where DATA/SUBSET.cat exists; every example of the subset must have exactly one hypothesis), bleu
(scoring/bleu.py, sacrebleu; the Moses detokenizer in the target language of DATA's language pair), cfq_sparql
(scoring/cfq_sparql.py: CFQ-im outputs on their restored SPARQL), comp (scoring/comp.py, needs DATA/SUBSET.comp), ...
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import hashlib
import json
import logging
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import List, NoReturn, Optional, Sequence, Tuple

from fairseq_compgen import recipes, scoring
from fairseq_compgen.checkpoint_loading import checkpoint_file
from fairseq_compgen.data.io import gzip_text, read_text_lines, stale_entries
from fairseq_compgen.errors import MissingFileError, UsageError, check_output_folder

OUTPUTS = ".outputs.gz"  # eval/SUBSET.outputs.gz: the module docstring
# source, reference, hypothesis, detokenized hypothesis, and COGS tagging's E- (why tags gave no logical form)
OUTPUT_LINE = re.compile(r"^[STHDE]-\d+\t")


def outputs_text(generated: Path) -> str:
    """The lines of fairseq-generate's output `generated` that SUBSET.outputs.gz keeps, as they were printed."""
    return "".join(line for line in read_text_lines(generated, "fairseq-generate output (S-/T-/H- lines)")
                   if OUTPUT_LINE.match(line))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fairseq-compgen eval", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("checkpoint")
    p.add_argument("data", help="the data folder the model was trained on (or one with the same dictionaries)")
    p.add_argument("subsets", nargs="*", help="default: every subset of DATA but train")
    p.add_argument("--cpu", action="store_true", help="decode on CPU")
    p.add_argument("--metric", choices=scoring.names(), default=None,
                   help="default: the metric DATA/dataset.json declares (a one-file dataset's prep writes it), "
                        "else exact_match")
    p.add_argument("--generate-flags", default="", help="extra fairseq-generate flags, one string")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--out", help="output folder (default: CHECKPOINT's folder/eval for checkpoint_last.pt, "
                                 "CHECKPOINT's folder/eval/STEM for another checkpoint)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace results in OUT of another checkpoint (default: refuse)")
    p.add_argument("--user-dir", metavar="PLUGIN",
                   help="the plugin folder the model was trained with (fairseq-train's --user-dir: its own position "
                        "encodings, models or tasks), imported before the checkpoint is loaded")
    return p


DEFAULT_CHECKPOINT = "checkpoint_last.pt"  # the checkpoint whose results a sweep and aggregate read (RUN/eval/)


def default_out(ckpt: Path) -> Path:
    """RUN/eval for RUN/checkpoint_last.pt; RUN/eval/STEM for another checkpoint (a folder that neither the sweep
    nor aggregate, which read RUN/eval/*.json, mistake for the default checkpoint's results)."""
    return ckpt.parent / "eval" if ckpt.name == DEFAULT_CHECKPOINT else ckpt.parent / "eval" / ckpt.stem


def checkpoint_record(ckpt: Path) -> dict:
    """What a result JSON says about the checkpoint that produced it: its path relative to its run folder (the
    folder holding it: its file name) and the sha256 of its bytes."""
    h = hashlib.sha256()
    with open(ckpt, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return {"checkpoint": ckpt.name, "checkpoint_sha256": h.hexdigest()}


def _recorded_metric(old: dict) -> Optional[str]:
    """The metric a result JSON was scored by: its "metric" field, or (JSONs before it) its scorer's key."""
    if isinstance(old.get("metric"), str):
        return old["metric"]
    scorer = next((s for s in map(scoring.by_key, old) if s is not None), None)
    return scorer.name if scorer else None


def check_replaceable(path: Path, record: dict, ckpt: Path, metric: str, generate_flags: str) -> None:
    """UsageError unless `path` (a SUBSET.json) is absent or holds a result of the checkpoint of `record`, scored
    by `metric` and decoded with `generate_flags` (shell-joined): a result made otherwise is not replaced in
    silence (where a JSON before these fields says nothing, nothing is compared)."""
    if not path.is_file():
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        old = {}
    old = old if isinstance(old, dict) else {}
    again = "pass --overwrite to replace it, or choose another --out"
    if old.get("checkpoint_sha256") == record["checkpoint_sha256"] and old.get("checkpoint") != record["checkpoint"]:
        raise UsageError(f"{path} holds the result of {old.get('checkpoint') or 'a checkpoint it does not name'}, a file "
                         f"with the same bytes as {ckpt} (sha256 {record['checkpoint_sha256'][:12]}) and this "
                         f"result's under its own name: {again}")
    if not all(old.get(k) == v for k, v in record.items()):
        what = (f"{old['checkpoint']} (sha256 {str(old.get('checkpoint_sha256'))[:12]})" if old.get("checkpoint")
                else "a checkpoint it does not name")
        raise UsageError(f"{path} holds the result of {what}, not of {ckpt} (sha256 "
                         f"{record['checkpoint_sha256'][:12]}): expected no result or this checkpoint's there; {again}")
    old_metric = _recorded_metric(old)
    if old_metric is not None and old_metric != metric:
        raise UsageError(f"{path} holds this checkpoint's result by --metric {old_metric}, not {metric}: {again}")
    if isinstance(old.get("generate_flags"), str) and old["generate_flags"] != generate_flags:
        raise UsageError(f"{path} holds this checkpoint's result decoded with --generate-flags "
                         f"{old['generate_flags']!r}, not {generate_flags!r}: {again}")


def no_subset(data: Path, subset: str, kind: str) -> UsageError:
    """The error for a subset DATA lacks, naming the ones it has (or saying it has none)."""
    have = recipes.subsets_of(data)
    listed = f"it has: {', '.join(have)}" if have else "it has none: expected a data folder made by fairseq-compgen prep"
    return UsageError(f"no {kind} subset {subset!r} in {data} ({listed})")


def check_subset(data: Path, subset: str, tagging: bool, metric: str) -> None:
    """UsageError (MissingFileError) unless DATA has `subset` and what the scorer reads (for --metric comp, its
    SUBSET.comp): found before any subset is decoded rather than after the ones before it."""
    if tagging:
        if not (data / f"{subset}.src").is_file():
            raise no_subset(data, subset, "tagging")
    elif not glob.glob(f"{glob.escape(str(data))}/{glob.escape(subset)}.*-*.src.idx"):
        raise no_subset(data, subset, "binarized")
    scoring.get(metric, "--metric").check(data, subset)


def reference_stats(data: Path, subset: str) -> Tuple[int, int]:
    """(examples, longest reference in tokens + EOS) of a binarized seq2seq subset (check_subset found it)."""
    from fairseq.data import data_utils

    from fairseq_compgen.data.binarize import check_binarized

    src = glob.glob(f"{glob.escape(str(data))}/{glob.escape(subset)}.*-*.src.idx")
    for side in ("src", "tgt"):
        check_binarized(src[0][: -len("src.idx")] + side)
    tgt = data_utils.load_indexed_dataset(src[0][: -len("src.idx")] + "tgt", None)
    return len(tgt), int(tgt.sizes.max())


def check_checkpoint(ckpt: Path) -> None:
    """UsageError unless `ckpt` is a complete fairseq checkpoint (a dict with the model's weights under "model"):
    an empty, truncated or other file would fail deep in fairseq's loading with a traceback. Read with the safe
    loader (checkpoint_loading.py): a file holding a disallowed type is refused as such, and nothing in it runs."""
    from fairseq_compgen.checkpoint_loading import UntrustedCheckpointError, load

    expected = "expected a complete checkpoint written by fairseq-train (fairseq-compgen train)"
    if ckpt.stat().st_size == 0:
        raise UsageError(f"{ckpt} is empty: {expected}")
    try:
        state = load(ckpt)
    except UntrustedCheckpointError:
        raise
    except Exception as e:
        why = (str(e).strip().splitlines() or [""])[0][:120]
        raise UsageError(f"{ckpt} cannot be read as a checkpoint ({type(e).__name__}: {why}): {expected}; an "
                         f"interrupted copy or training leaves an incomplete file") from None
    if not isinstance(state, dict) or "model" not in state:
        raise UsageError(f"{ckpt} holds a {type(state).__name__} without the model's weights ('model'): {expected}")
    from fairseq_compgen.tasks.divergence import check_weights

    check_weights(state, str(ckpt))  # NaN/Inf weights: fairseq's generator failed with an AssertionError traceback


# fairseq's SequenceGenerator ends a sentence as soon as --beam hypotheses have ended (its is_finished), whatever
# their scores, and keeps no later, better one: a near-certain model whose junk alternatives end early fills the beam
# with them before its own output ends. Measured (results/beam_search_scan26/, docs/experiments.md "Beam search and
# exact match"): Rel. Uni. trained 50,000 updates on SCAN length, gen exact match 0.976 greedy, 0.037 with --beam 4.
BEAM_NOTE = ("note: --beam {beam} with an exact-match metric: fairseq's beam search ends a sentence once {beam} "
             "hypotheses have ended, whatever their scores, so a confident model's early-ending alternatives can "
             "crowd out its own output (SCAN length, Rel. Uni., gen: 0.976 greedy, 0.037 with --beam 4); "
             "--generate-flags \"--beam {beam} --beam-stop bound\" ends a sentence only when no hypothesis left can "
             "beat the best ended one; the papers decode greedily (docs/experiments.md, 'Beam search and exact match')")
SEQUENCE_METRICS = ("exact_match", "comp")  # scored on the whole output: the metrics BEAM_NOTE is about


def requested_beam(extra: Sequence[str]) -> Tuple[int, str]:
    """The --beam and --beam-stop the extra fairseq-generate flags ask for (1 and fairseq, eval's own, when they set
    none or fairseq would reject the value: fairseq's parser reports that)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--beam", default="1")
    p.add_argument("--beam-stop", default="fairseq")
    try:
        known = p.parse_known_args(list(extra))[0]
        return int(known.beam), known.beam_stop
    except (ValueError, SystemExit):
        return 1, "fairseq"


FAIRSEQ_MAX_LEN = (0.0, 200)  # fairseq-generate's own --max-len-a and --max-len-b


def length_limit(metric: str, extra: Sequence[str], maxlen: int) -> Tuple[List[str], dict]:
    """The output-length flags of a seq2seq decoding (before the user's --generate-flags) and the record of them:
    the references' limits only for greedy decoding scored by exact match with no length flag of the user's (the
    module docstring says why); else none, so fairseq's own or the user's --max-len-a/-b hold. `maxlen`: the
    subset's longest reference in tokens + EOS."""
    p = argparse.ArgumentParser(add_help=False)
    for flag, default in zip(("--max-len-a", "--max-len-b"), FAIRSEQ_MAX_LEN):
        p.add_argument(flag, type=type(default), default=None)
    p.add_argument("--sampling", action="store_true")
    try:
        known = p.parse_known_args(list(extra))[0]
    except SystemExit:  # a value fairseq's parser rejects: it says so when generate parses the flags
        known = argparse.Namespace(max_len_a=None, max_len_b=None, sampling=False)
    own = known.max_len_a is not None or known.max_len_b is not None
    beam, stop = requested_beam(extra)
    if metric == "exact_match" and beam == 1 and stop == "fairseq" and not known.sampling and not own:
        return (["--max-len-a", "0", "--max-len-b", str(maxlen), "--max-len-from-target"],
                {"from_references": True, "max_len_b": maxlen})
    a, b = (FAIRSEQ_MAX_LEN[0] if known.max_len_a is None else known.max_len_a,
            FAIRSEQ_MAX_LEN[1] if known.max_len_b is None else known.max_len_b)
    return [], {"from_references": False, "max_len_a": a, "max_len_b": b}


def check_generate_flags(flags: Sequence[str]) -> None:
    """fairseq-generate's parser, with the compgen task's options, on the flags `--generate-flags` passes on: an
    unknown flag or a bad value is one line naming it (a sweep checks its generate_flags so before any run trains:
    a typo was found only after training, and the runs were then refused as made with other settings)."""
    from fairseq import options

    import fairseq_compgen

    fairseq_compgen.register()
    parser = options.get_generation_parser()

    def error(message: str) -> NoReturn:  # argparse's ArgumentParser.error: usage, the message, exit status 2
        raise UsageError(f"fairseq-generate: {message}")

    parser.error = error
    options.parse_args_and_arch(parser, ["DATA", "--user-dir", str(recipes.PACKAGE), "--task", "compgen", "--path",
                                         "CHECKPOINT", *flags])


def generate_seq2seq(ckpt: Path, data: Path, subset: str, length: Sequence[str], cpu: bool, batch_size: int,
                     extra: Sequence[str], out: Path) -> None:
    """fairseq-generate, in this process, writing its output (S/T/H lines and its log) to `out`; `length`: the
    output-length flags of length_limit."""
    from fairseq import options
    from fairseq_cli import generate

    import fairseq_compgen

    fairseq_compgen.register()
    args = [str(data), "--user-dir", str(recipes.PACKAGE), "--task", "compgen", "--path", str(ckpt),
            "--gen-subset", subset, "--beam", "1", "--nbest", "1", "--min-len", "0", *length,
            "--batch-size", str(batch_size),
            "--required-batch-size-multiple", "1", *(["--cpu"] if cpu else []), *extra]
    parsed = options.parse_args_and_arch(options.get_generation_parser(), input_args=args)
    def reset_logging():  # fairseq-generate sends its log to its output stream, configured once per process
        for h in logging.root.handlers[:]:
            logging.root.removeHandler(h)
    reset_logging()
    try:
        with open(out, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
            generate.main(parsed)
    finally:
        reset_logging()


def generate_tagging(ckpt: Path, data: Path, subset: str, cpu: bool, batch_size: int, extra: Sequence[str],
                     out: Path) -> int:
    """COGS tagging's decoding of `subset` (check_subset found it) into `out`; the number of examples."""
    from fairseq_compgen.tasks import cogs_tagging_generate

    with open(out, "w", encoding="utf-8") as f:
        cogs_tagging_generate.main([str(ckpt), str(data), "--gen-subset", subset, "--batch-size", str(batch_size),
                                    *(["--cpu"] if cpu else []), *extra], out=f)
    with open(data / f"{subset}.src", encoding="utf-8") as f:
        return sum(1 for _ in f)


def score(metric: str, generated: Path, data: Path, subset: str, n: int, table: Path) -> dict:
    """The scorer's result of `generated` (its table printed into the file `table`)."""
    scorer = scoring.get(metric, "--metric")
    argv = scorer.eval_argv(generated, data, subset, n)
    with open(table, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
        return scorer.main(argv)


def evaluate(ckpt, data, subsets: Sequence[str] = (), cpu: bool = False, metric: str = "exact_match",
             generate_flags: str = "", batch_size: int = 256, out=None, echo=print, overwrite: bool = False,
             user_dir=None) -> dict:
    """Decode and score each subset; {subset: result dict}. Files as the module docstring says."""
    ckpt, data = Path(ckpt), Path(data)
    if user_dir:
        import fairseq_compgen

        fairseq_compgen.import_user_dir(user_dir)
    checkpoint_file(ckpt)
    if not data.is_dir():
        raise MissingFileError(f"no data folder at {data}")
    tagging = recipes.is_tagging(data)
    subsets: List[str] = list(subsets) or recipes.subsets_of(data)
    if not subsets:
        raise UsageError(f"{data} has no binarized subset other than train: nothing to evaluate")
    for subset in subsets:  # every subset and its metadata before anything is decoded
        check_subset(data, subset, tagging, metric)
    out_flag = "--out" if out else "the evaluation folder (--out's default)"
    out = Path(out) if out else default_out(ckpt)
    check_output_folder(out, out_flag)
    record = checkpoint_record(ckpt)
    try:
        extra = shlex.split(generate_flags)
    except ValueError as e:  # "No closing quotation": a traceback, after the output folder was made
        raise UsageError(f"--generate-flags {generate_flags!r}: {str(e)[0].lower()}{str(e)[1:]}: expected flags "
                         f"split like a shell (quotes in pairs)") from None
    if not overwrite:
        for subset in subsets:
            check_replaceable(out / f"{subset}.json", record, ckpt, metric, shlex.join(extra))
    check_checkpoint(ckpt)  # once, before any folder is made or any subset's data is read
    made = [p for p in (out, *out.parents) if not p.exists()]  # the folders this call makes, deepest first
    out.mkdir(parents=True, exist_ok=True)
    for subset in subsets:  # what an evaluation killed outright (SIGKILL) left under its temporary names
        for ext in (".generate.txt", ".table.txt", ".json", OUTPUTS):
            for stale in stale_entries(out, f"{subset}{ext}.tmp-"):
                stale.unlink(missing_ok=True)
    from fairseq_compgen.pipelines.train import machine
    # a run may be evaluated elsewhere than it trained (a lent GPU's checkpoints); --cpu may come in the flags too
    where = json.loads(machine(cpu or "--cpu" in extra))
    beam, stop = (1, "fairseq") if tagging else requested_beam(extra)
    if beam > 1 and stop == "fairseq" and metric in SEQUENCE_METRICS:
        print(BEAM_NOTE.format(beam=beam), file=sys.stderr)
    results = {}
    try:
        for subset in subsets:
            start, cpu_start = time.monotonic(), time.process_time()
            generated, table, result, outputs = (out / f"{subset}{ext}"
                                                 for ext in (".generate.txt", ".table.txt", ".json", OUTPUTS))
            # temporary names of this process: two evaluations into one folder do not write each other's files
            tmps = [p.with_name(f"{p.name}.tmp-{os.getpid()}") for p in (generated, table, result, outputs)]
            try:
                if tagging:
                    n = generate_tagging(ckpt, data, subset, cpu, batch_size, extra, tmps[0])
                    limit = None
                else:
                    n, maxlen = reference_stats(data, subset)
                    length, limit = length_limit(metric, extra, maxlen)
                    if not limit["from_references"] and limit["max_len_a"] == 0 and limit["max_len_b"] < maxlen - 1:
                        print(f"note: {subset}'s outputs are limited to {limit['max_len_b']} tokens (--max-len-b), "
                              f"fewer than its longest reference ({maxlen - 1} and EOS): pass --generate-flags "
                              f"\"--max-len-b {maxlen}\" or more", file=sys.stderr)
                    generate_seq2seq(ckpt, data, subset, length, cpu, batch_size, extra, tmps[0])
                tmps[0].replace(generated)  # kept when the scoring fails: the output it could not score
                r = score(metric, generated, data, subset, n, tmps[1]) | record
                r |= {"generate_flags": shlex.join(extra), "metric": metric}
                if limit is not None:
                    r["max_len"] = limit
                r["evaluated"] = {"machine": where, "seconds": round(time.monotonic() - start, 1),
                                  "cpu_seconds": round(time.process_time() - cpu_start, 1)}
                tmps[2].write_text(json.dumps(r, indent=2, sort_keys=True) + "\n", encoding="utf-8")
                tmps[3].write_bytes(gzip_text(outputs_text(generated)))
                tmps[1].replace(table)
                tmps[3].replace(outputs)
                tmps[2].replace(result)
            finally:
                for tmp in tmps:
                    tmp.unlink(missing_ok=True)
            scorer = scoring.get(metric)
            echo(f"{subset:8s} n={r.get('n', n):6d} {r.get('label') or scorer.label}={r[scorer.key]:.4f}")
            results[subset] = r
    except BaseException:  # e.g. an unreadable checkpoint: no empty folder of ours is left behind
        for folder in made:
            with contextlib.suppress(OSError):  # only an empty folder can be removed: results stay
                folder.rmdir()
        raise
    return results


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fairseq_compgen.data.dataset import declared_metric

    a = parser().parse_args(argv)
    if a.batch_size < 1:  # fairseq-generate took 0 and -4 without a word (2026-11-28)
        raise UsageError(f"--batch-size {a.batch_size}: expected a positive number")
    from fairseq_compgen.cli import fairseq_logging

    # warnings on stderr as fairseq writes them; fairseq's INFO lines of this process before each decoding (the
    # subset's examples loaded, --user-dir) stay out, and fairseq-generate's log goes to SUBSET.generate.txt
    fairseq_logging("WARNING", sys.stderr)
    metric = a.metric or declared_metric(Path(a.data)) or "exact_match"
    evaluate(a.checkpoint, a.data, a.subsets, a.cpu, metric, a.generate_flags, a.batch_size, a.out,
             overwrite=a.overwrite, user_dir=a.user_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
