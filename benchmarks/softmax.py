"""Last-dimension softmax on CPU: torch.softmax against the composite of fairseq_compgen/modules/softmax.py, by row
length, forward and forward + backward, side by side in one run (the evidence for that module's row-length rule).

    OMP_NUM_THREADS=1 python benchmarks/softmax.py                       # float32 and bfloat16, rows of 4-64
    OMP_NUM_THREADS=1 python benchmarks/softmax.py --lengths 9 10 13 16 28 --json results/softmax_cpu.json

Each cell is the median over --rounds rounds of the mean time of --calls calls on a [rows, K] tensor of about
--elements elements (attention logits flattened: batch x heads x queries rows of K keys). "ratio" is torch's time
divided by the composite's: above 1, the composite is faster.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fairseq_compgen.modules.softmax import _ShortRowSoftmax, _cpu_register  # noqa: E402


def timed(fn, calls: int, rounds: int) -> float:
    for _ in range(3):
        fn()
    means = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        means.append((time.perf_counter() - t) / calls)
    return statistics.median(means)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[4, 8, 9, 10, 12, 13, 15, 16, 17, 20, 28, 32, 64])
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    p.add_argument("--elements", type=int, default=256 * 4 * 20 * 10)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    from fairseq_compgen.pipelines.train import commit

    started_at = commit()  # read before measuring
    torch.manual_seed(0)
    rows_out = []
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, threads "
          f"{torch.get_num_threads()}; the module takes the composite for rows of fewer than {_cpu_register()} bytes")
    print("| dtype | K | rows | fwd torch us | fwd composite us | ratio | fwd+bwd torch us | fwd+bwd composite us "
          "| ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype in a.dtypes:
        for k in a.lengths:
            rows = max(1, a.elements // k)
            x = torch.randn(rows, k).to(getattr(torch, dtype)).requires_grad_()
            g = torch.randn(rows, k).to(x.dtype)
            with torch.no_grad():
                f_t = timed(lambda: torch.softmax(x, -1), a.calls, a.rounds)
                f_c = timed(lambda: _ShortRowSoftmax.apply(x), a.calls, a.rounds)
            b_t = timed(lambda: torch.softmax(x, -1).backward(g), a.calls, a.rounds)
            b_c = timed(lambda: _ShortRowSoftmax.apply(x).backward(g), a.calls, a.rounds)
            row = {"dtype": dtype, "K": k, "rows": rows, "fwd_torch_us": 1e6 * f_t, "fwd_composite_us": 1e6 * f_c,
                   "fwd_ratio": f_t / f_c, "fwdbwd_torch_us": 1e6 * b_t, "fwdbwd_composite_us": 1e6 * b_c,
                   "fwdbwd_ratio": b_t / b_c}
            rows_out.append(row)
            print(f"| {dtype} | {k} | {rows} | {row['fwd_torch_us']:.0f} | {row['fwd_composite_us']:.0f} | "
                  f"{row['fwd_ratio']:.2f} | {row['fwdbwd_torch_us']:.0f} | {row['fwdbwd_composite_us']:.0f} | "
                  f"{row['fwdbwd_ratio']:.2f} |", flush=True)
    if a.json:
        from fairseq_compgen.data.io import atomic_write_text
        from fairseq_compgen.pipelines import train

        record = {"command": "benchmarks/softmax.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  "commit": started_at, "machine": json.loads(train.machine(True)), "register_bytes": _cpu_register(),
                  "rows": rows_out}
        atomic_write_text(a.json, json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
