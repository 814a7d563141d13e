"""Search errors or model errors: for each wrong hypothesis a run decoded, does the model itself prefer the reference?

    fairseq-compgen eval CHECKPOINT DATA gen --cpu --generate-flags "--max-len-b 200" --out /tmp/gen200
    python campaign/search_errors.py CHECKPOINT DATA /tmp/gen200/gen.outputs.gz [--json /tmp/gen_search_errors.json]

A wrong output is a *search error* when the model gives the reference a higher probability than the output it
decoded (a better search would have found the reference; greedy decoding and beam search do not search the whole
space), and a *model error* when it gives its own wrong output at least the reference's probability (no search finds
the reference then). The distinction and the test are Stahlberg & Byrne's ("On NMT Search Errors and Model Errors:
Cat Got Your Tongue?", EMNLP 2019), here on whole sequences: log p(y | x) = sum over the tokens of y and its EOS of
the token's log-probability, one teacher-forced pass of the model in eval mode, no length normalization.

OUTPUTS: the decoded outputs a run keeps (eval/SUBSET.outputs.gz, or a fairseq-generate output): its S- (source),
T- (reference) and first H- (hypothesis) lines; exact match as `fairseq-compgen score exact_match`. DATA: the data
folder the checkpoint trained on (its dictionaries). The checkpoint is read by fairseq's loader through this package's
safe loader (fairseq_compgen/checkpoint_loading.py); a word its dictionaries lack (the outputs of a run on other
data) is refused, never scored as <unk>. Outputs decoded with the references' length limits are refused too
(check_length_limit): fairseq-compgen eval's greedy exact-match decoding stops each batch at its longest reference,
so an output cut there ends in a forced EOS that counts against it; decode again with --generate-flags
"--max-len-b 200" (fairseq's own limit). Prints the counts, and the wrong examples by reference length; --json writes
them (through a temporary name).
"""
import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fairseq_compgen.data.io import atomic_write_text  # noqa: E402
from fairseq_compgen.errors import UsageError  # noqa: E402
from jump_errors import wrong_outputs  # noqa: E402

_SOURCE = re.compile(r"^S-(\d+)\t(.*)$")


def wrong_examples(path: str) -> Tuple[int, List[Tuple[int, List[str], List[str], List[str]]]]:
    """(n, [(id, source, hypothesis, reference) of each wrong example, token lists]) from a generate output."""
    n, wrong, refs, hyps, lines, name = wrong_outputs(Path(path))
    sources = {int(m.group(1)): m.group(2).split() for m in map(_SOURCE.match, lines) if m}
    missing = sorted(set(refs) - set(sources))
    if missing:
        raise UsageError(f"{name}: no source line for {len(missing)} of {len(refs)} examples (e.g. id {missing[0]}): "
                         f"expected the S-, T- and H- lines of the whole decoded subset")
    return n, [(i, sources[i], hyps[i], refs[i]) for i in sorted(wrong)]


def check_length_limit(path: str) -> None:
    """UsageError when the outputs at `path` were decoded with the references' length limits: eval/SUBSET.outputs.gz
    beside a SUBSET.json whose "max_len" says so or that has none (every eval before 2026-11-29 set them), or a
    fairseq-generate output whose printed config has max_len_from_target True."""
    outputs = Path(path)
    record = outputs.with_name(outputs.name[: -len(".outputs.gz")] + ".json") if outputs.name.endswith(
        ".outputs.gz") else None
    fix = ("an output cut there ends in a forced EOS that counts against it: decode again with --generate-flags "
           "\"--max-len-b 200\" (fairseq's own limit) and classify those outputs")
    if record is not None and record.is_file():
        limit = json.loads(record.read_text(encoding="utf-8")).get("max_len")
        if limit is None or limit.get("from_references"):
            when = " (as every evaluation before 2026-11-29 did)" if limit is None else ""
            raise UsageError(f"{record}: these outputs were decoded with each batch stopped at its longest "
                             f"reference{when}; {fix}")
    elif not outputs.name.endswith(".gz") and outputs.is_file() and \
            "'max_len_from_target': True" in outputs.read_text(encoding="utf-8", errors="replace"):
        raise UsageError(f"{outputs}: decoded with --max-len-from-target (each batch stopped at its longest "
                         f"reference); {fix}")


def check_batch_size(batch_size: int) -> None:
    if batch_size < 1:  # range() would score nothing (a negative step: every wrong output a model error) or fail (0)
        raise UsageError(f"--batch-size {batch_size}: expected a positive number")


def sequence_log_probs(model, src_dict, tgt_dict, pairs: Sequence[Tuple[List[str], List[str]]],
                       batch_size: int = 256) -> List[float]:
    """log p(y | x) of each (source tokens, output tokens) pair: the output and EOS, scored by one teacher-forced pass
    per batch (natural log)."""
    import torch
    from fairseq.data import data_utils

    check_batch_size(batch_size)
    pad, eos = tgt_dict.pad(), tgt_dict.eos()
    out: List[float] = []
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start:start + batch_size]
        src = [src_dict.encode_line(" ".join(s), add_if_not_exist=False, append_eos=True).long() for s, _ in chunk]
        tgt = [tgt_dict.encode_line(" ".join(y), add_if_not_exist=False, append_eos=True).long() for _, y in chunk]
        src_tokens = data_utils.collate_tokens(src, src_dict.pad(), src_dict.eos(), left_pad=True)  # [B, S]
        target = data_utils.collate_tokens(tgt, pad, eos)  # [B, T]: tokens, EOS, pads
        prev = data_utils.collate_tokens(tgt, pad, eos, move_eos_to_beginning=True)  # [B, T]: EOS, tokens, pads
        with torch.no_grad():
            net = model(src_tokens, torch.tensor([len(s) for s in src]), prev)
            lprobs = model.get_normalized_probs(net, log_probs=True)  # [B, T, V]
        token = lprobs.gather(2, target[:, :, None])[:, :, 0].masked_fill(target.eq(pad), 0.0)  # [B, T]
        out.extend(token.sum(1).tolist())
    return out


def check_words(src_dict, tgt_dict, wrong, name: str) -> None:
    """Refuse a word the checkpoint's dictionaries lack (outputs of another dataset or vocabulary): it would be
    scored as <unk> in silence. The unknown word itself, which a model may decode, is a word of every dictionary."""
    for i, source, hyp, ref in wrong:
        for line, words, d in (("S", source, src_dict), ("H", hyp, tgt_dict), ("T", ref, tgt_dict)):
            unknown = [w for w in words if d.index(w) == d.unk() and w != d.unk_word]
            if unknown:
                raise UsageError(f"{name}: line {line}-{i} has {unknown[0]!r}, a word the checkpoint's dictionary "
                                 f"lacks: expected the outputs of a run trained on this data folder")


def classify(model, src_dict, tgt_dict, wrong, batch_size: int = 256) -> dict:
    """Counts of search and model errors among `wrong` (wrong_examples' list), also per reference length."""
    ref = sequence_log_probs(model, src_dict, tgt_dict, [(s, r) for _, s, _, r in wrong], batch_size)
    hyp = sequence_log_probs(model, src_dict, tgt_dict, [(s, h) for _, s, h, _ in wrong], batch_size)
    by_length: Dict[int, Dict[str, int]] = defaultdict(lambda: {"wrong": 0, "search_errors": 0})
    search = 0
    for (_, _, _, r), lr, lh in zip(wrong, ref, hyp):
        by_length[len(r)]["wrong"] += 1
        if lr > lh:  # the model prefers the reference to what was decoded
            search += 1
            by_length[len(r)]["search_errors"] += 1
    return {"wrong": len(wrong), "search_errors": search, "model_errors": len(wrong) - search,
            "per_length": {str(k): by_length[k] for k in sorted(by_length)}}


def load(checkpoint: str, data: str):
    """(model in eval mode on CPU, source dictionary, target dictionary) of a checkpoint, read safely."""
    import fairseq_compgen
    from fairseq import checkpoint_utils

    from fairseq_compgen.checkpoint_loading import wrap_fairseq_loader

    fairseq_compgen.register()
    wrap_fairseq_loader()
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides={"data": data})
    return models[0].eval(), task.source_dictionary, task.target_dictionary


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint")
    p.add_argument("data", help="the data folder the checkpoint trained on (its dict.*.txt)")
    p.add_argument("outputs", help="decoded outputs: eval/SUBSET.outputs.gz or a fairseq-generate output")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--json", help="also write the counts here")
    a = p.parse_args(argv)
    check_batch_size(a.batch_size)  # before the checkpoint loads
    check_length_limit(a.outputs)
    n, wrong = wrong_examples(a.outputs)
    model, src_dict, tgt_dict = load(a.checkpoint, a.data)
    check_words(src_dict, tgt_dict, wrong, a.outputs)
    result = {"outputs": a.outputs, "n": n, **classify(model, src_dict, tgt_dict, wrong, a.batch_size)}
    print(f"{a.outputs}: {n} examples, {result['wrong']} wrong: {result['search_errors']} search errors (the model "
          f"prefers the reference), {result['model_errors']} model errors (it prefers its own output)")
    print("reference length: wrong, search errors")
    for length, c in result["per_length"].items():
        print(f"  {length}: {c['wrong']}, {c['search_errors']}")
    if a.json:
        atomic_write_text(Path(a.json), json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
