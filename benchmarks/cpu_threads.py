"""Train-step time on CPU by intra-op thread count and OpenMP wait policy, alone and beside a busy neighbour.

    python benchmarks/cpu_threads.py [--arch rel_uni_transformer_scan] [--json results/cpu_threads.json]

Each configuration runs in a fresh process (OMP_NUM_THREADS and OMP_WAIT_POLICY are read when the OpenMP runtime
starts): forward + backward + Adam on a SCAN-sized batch (256 sentences, source 9, target 27 tokens; Table 4's
SCAN model), median of --steps steps after 2 warm-up steps. "beside a busy neighbour": the same step runs in a
second process with one thread at the same time, as when two runs share a 2-core machine. Times are ratios to
one thread alone, measured in the same run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def step_ms(arch: str, steps: int) -> float:
    import torch
    import torch.nn.functional as F

    import fairseq_compgen

    fairseq_compgen.register()
    from fairseq_compgen.models.standalone import build_model

    torch.manual_seed(0)
    model = build_model(arch, src_words=13, tgt_words=6).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    B, S, T = 256, 9, 27
    src, tgt = torch.randint(4, 17, (B, S)), torch.randint(4, 10, (B, T))
    prev = torch.cat([torch.full_like(tgt[:, :1], 2), tgt[:, :-1]], 1)
    lengths = torch.full((B,), S)

    def step():
        opt.zero_grad(set_to_none=True)
        out, _ = model(src, lengths, prev)
        F.cross_entropy(out.reshape(-1, out.size(-1)), tgt.reshape(-1)).backward()
        opt.step()

    times = []
    for i in range(steps + 2):
        t = time.perf_counter()
        step()
        if i >= 2:
            times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def child(arch, threads, policy, steps):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), OMP_WAIT_POLICY=policy)
    return subprocess.Popen([sys.executable, __file__, "--measure", arch, "--steps", str(steps)], env=env,
                            stdout=subprocess.PIPE, text=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="rel_uni_transformer_scan")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--json")
    p.add_argument("--measure", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.measure:
        print(step_ms(a.measure, a.steps))
        return 0
    rows = []
    for neighbour in (False, True):
        for threads, policy in ((1, "PASSIVE"), (2, "ACTIVE"), (2, "PASSIVE")):
            busy = child(a.arch, 1, "PASSIVE", a.steps * 3) if neighbour else None
            if busy:
                time.sleep(4)  # let the neighbour get past start-up
            ms = float(child(a.arch, threads, policy, a.steps).communicate()[0])
            if busy:
                busy.kill()
                busy.wait()
            rows.append({"threads": threads, "omp_wait_policy": policy, "busy_neighbour": neighbour, "step_ms": ms})
    base = rows[0]["step_ms"]
    print(f"{a.arch}, {os.cpu_count()} cores; step time (forward + backward + Adam), ratio to 1 thread alone")
    print("| threads | OMP_WAIT_POLICY | beside a busy 1-thread process | step ms | ratio |")
    print("|---|---|---|---|---|")
    for r in rows:
        r["ratio"] = round(r["step_ms"] / base, 2)
        print(f"| {r['threads']} | {r['omp_wait_policy']} | {'yes' if r['busy_neighbour'] else 'no'} | "
              f"{r['step_ms']:.0f} | {r['ratio']:.2f} |")
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump({"arch": a.arch, "cpus": os.cpu_count(), "rows": rows}, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
