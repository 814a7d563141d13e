"""Decode a `compgen_tagger` checkpoint on a COGS tagging subset, printing fairseq-generate's line format.

fairseq-generate needs a decoder; the tagger has none (Ontañón et al. 2022, §4.5.1: every token gets its
5 tags in one forward pass). This prints, per example, the lines fairseq-generate would

    S-<id>\\t<sentence>
    T-<id>\\t<reference logical form>
    H-<id>\\t0\\t<logical form rebuilt from the predicted tags>     (empty when the tags describe none)
    E-<id>\\t<why the tags describe no logical form>                 (only then)

so `python -m fairseq_compgen.scoring.exact_match LOG --categories DATA/gen.cat` scores it as any other
run (per COGS generalization category for gen), and `fairseq-compgen eval` uses it for tagging data:

    python -m fairseq_compgen.tasks.cogs_tagging_generate CHECKPOINT DATA --gen-subset gen [--cpu] > gen.txt

The last line is a summary: examples, exact match, and the share with all 5 tags right at every token
(the authors' metric). Every example of the subset is printed exactly once (checked).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence

import torch

from fairseq_compgen.checkpoint_loading import checkpoint_file
from fairseq_compgen.errors import UsageError


def main(argv: Optional[Sequence[str]] = None, out=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="a compgen_tagger checkpoint (fairseq-train --task cogs_tagging)")
    p.add_argument("data", help="the folder written by fairseq-compgen prep cogs_tagging")
    p.add_argument("--gen-subset", default="test", help="subset to decode (train, valid, test, gen)")
    p.add_argument("--batch-size", type=int, default=256, help="sentences per batch")
    p.add_argument("--cpu", action="store_true", help="decode on the CPU even when CUDA is available")
    p.add_argument("--fp16", action="store_true", help="half precision on the GPU")
    args = p.parse_args(argv)
    out = out or sys.stdout
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    checkpoint_file(args.checkpoint)

    from fairseq import checkpoint_utils

    import fairseq_compgen
    from fairseq_compgen.tasks.cogs_tagging import CogsTaggingTask

    fairseq_compgen.register()

    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task([args.checkpoint], arg_overrides={"data": args.data})
    model = models[0]
    if not isinstance(task, CogsTaggingTask):
        raise UsageError(f"{args.checkpoint} was trained with task {type(task).__name__}, not cogs_tagging "
                         f"(decode seq2seq checkpoints with fairseq-generate / fairseq-compgen eval)")
    use_cuda = torch.cuda.is_available() and not args.cpu
    if args.fp16 and use_cuda:
        model.half()
    if use_cuda:
        model.cuda()
    task.load_dataset(args.gen_subset)
    dataset = task.dataset(args.gen_subset)
    batches = task.get_batch_iterator(dataset, max_sentences=args.batch_size, ignore_invalid_inputs=False,
                                      num_workers=0).next_epoch_itr(shuffle=False)
    seen, exact, tags_ok = set(), 0, 0
    for sample in batches:
        if use_cuda:
            sample["net_input"] = {k: v.cuda() for k, v in sample["net_input"].items()}
            sample["target"] = {k: v.cuda() for k, v in sample["target"].items()}
        for (idx, ok, lf, error), src, ref in zip(task.predict(model, sample), sample["src_text"], sample["lf"]):
            if idx in seen:
                raise RuntimeError(f"example {idx} of {args.gen_subset} decoded twice")
            seen.add(idx)
            exact += lf == ref
            tags_ok += ok
            print(f"S-{idx}\t{src}\nT-{idx}\t{ref}\nH-{idx}\t0\t{lf or ''}", file=out)
            if error:
                print(f"E-{idx}\t{error}", file=out)
    n = len(dataset)
    if len(seen) != n:
        raise RuntimeError(f"{len(seen)} of the {n} examples of {args.gen_subset} were decoded")
    result = {"n": n, "exact_match": exact / n, "tag_accuracy": tags_ok / n}
    print(f"Tagged {args.gen_subset}: {n} examples, exact match {exact / n:.4f}, all tags right {tags_ok / n:.4f}",
          file=out)
    return result


if __name__ == "__main__":
    from fairseq_compgen.scoring.exact_match import run_cli

    run_cli(main)
