"""Time of one validation (every batch of the given subsets) with the compgen task's single forward pass per batch
(the criterion's pass reused for `accuracy` and `tf_accuracy`) against the previous two passes, side by side in one
process, alternating rounds after one untimed pass of each; random-init weights of the preset (time depends on
shapes, not on values). Times are medians over the rounds, the ratio the median of the rounds' own ratios; --json
keeps every round's times.

    python benchmarks/validation.py data/scan/length_cutoff_26/bin --archs rel_uni_transformer_scan --rounds 3
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="a binarized data folder (fairseq-compgen prep)")
    p.add_argument("--archs", nargs="+", default=["rel_uni_transformer_scan", "compgen_transformer_scan"])
    p.add_argument("--subsets", nargs="+", default=["valid", "gen"])
    p.add_argument("--batch-size", type=int, default=256, help="sentences per batch (the csordas/scan recipe's)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", help="also write the rows here")
    a = p.parse_args(argv)
    from fairseq_compgen.pipelines.train import commit
    started_at = commit()  # read before measuring: a commit made while it runs must not be recorded instead
    import torch

    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import fairseq_compgen
    from fairseq_compgen.tasks import compgen

    fairseq_compgen.register()

    class TwoPasses(compgen._ForwardRecorder):  # the previous validation: the criterion's pass is not kept
        def __call__(self, *args, **kwargs):
            return self._model(*args, **kwargs)

    rows = []
    print(f"threads={torch.get_num_threads()} batch={a.batch_size} subsets={','.join(a.subsets)}")
    print(f"{'arch':30s} {'one pass s':>10s} {'two passes s':>12s} {'ratio':>6s}")
    for arch in a.archs:
        args = options.parse_args_and_arch(options.get_training_parser(), [
            a.data, "--task", "compgen", "--arch", arch, "--cpu", "--optimizer", "adam"])
        cfg = convert_namespace_to_omegaconf(args)
        task = tasks.setup_task(cfg.task)
        model, criterion = task.build_model(cfg.model), task.build_criterion(cfg.criterion)
        batches = []
        for s in a.subsets:
            task.load_dataset(s)
            itr = task.get_batch_iterator(task.dataset(s), max_sentences=a.batch_size, seed=1)
            batches += list(itr.next_epoch_itr(shuffle=False))

        def validate():
            t = time.perf_counter()
            for b in batches:
                task.valid_step(b, model, criterion)
            return time.perf_counter() - t

        original = compgen._ForwardRecorder
        one, two = [], []
        for recorder in (original, TwoPasses):  # one untimed warm-up pass of each, so no timed round runs cold
            compgen._ForwardRecorder = recorder
            validate()
        for _ in range(a.rounds):
            compgen._ForwardRecorder = original
            one.append(validate())
            compgen._ForwardRecorder = TwoPasses
            two.append(validate())
        compgen._ForwardRecorder = original
        # times: medians over the rounds; ratio: the median of the rounds' own ratios (paired), not the ratio of
        # the two medians; every round's times are kept
        r = {"arch": arch, "one_pass_s": statistics.median(one), "two_passes_s": statistics.median(two),
             "ratio": statistics.median(x / y for x, y in zip(one, two)), "rounds": a.rounds,
             "one_pass_rounds_s": one, "two_passes_rounds_s": two,
             "examples": sum(int(b["nsentences"]) for b in batches)}
        rows.append(r)
        print(f"{arch:30s} {r['one_pass_s']:10.2f} {r['two_passes_s']:12.2f} {r['ratio']:6.2f}", flush=True)
    if a.json:
        from fairseq_compgen.pipelines import train

        with open(a.json + ".tmp", "w") as f:
            json.dump({"command": " ".join(sys.argv), "commit": started_at, "machine": json.loads(train.machine(True)),
                       "rows": rows}, f, indent=1)
        Path(a.json + ".tmp").replace(a.json)


if __name__ == "__main__":
    main()
