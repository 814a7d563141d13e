"""Is training K seeds of one configuration in one process cheaper than K separate runs? Forward + backward time
of K replicas on one batch, three ways, side by side in one run:

  single   one model (the cost of one separate run's step; K runs cost K x this on the same cores)
  loop     K models in one process, one after another, losses summed (batched modules without batching)
  vmap     K models stacked with torch.func.stack_module_state, one functional_call under torch.func.vmap
           (randomness="different": each replica draws its own dropout masks)

    python benchmarks/seed_parallel.py [--arch rel_uni_transformer_scan] [--replicas 5] [--threads 1]

SCAN-sized batch (256 sentences, source 9, target 27 tokens; Table 4's SCAN model), dropout off in all three
(modules/dropout.py's autograd.Function has no vmap rule; the matrix products, not the masks, decide the comparison). docs/results.md's "Speed on CPU"
section records what it measured and what was decided from it.
"""
import argparse
import copy
import statistics
import sys
import time


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="rel_uni_transformer_scan")
    p.add_argument("--replicas", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=4)
    a = p.parse_args(argv)
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call, stack_module_state, vmap

    import fairseq_compgen

    fairseq_compgen.register()
    from fairseq_compgen.models.standalone import build_model

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    no_dropout = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    models = [build_model(a.arch, src_words=13, tgt_words=6, **no_dropout).train() for _ in range(a.replicas)]
    B, S, T = 256, 9, 27
    src, tgt = torch.randint(4, 17, (B, S)), torch.randint(4, 10, (B, T))
    prev = torch.cat([torch.full_like(tgt[:, :1], 2), tgt[:, :-1]], 1)
    lengths = torch.full((B,), S)

    def loss(out):
        return F.cross_entropy(out.reshape(-1, out.size(-1)), tgt.reshape(-1), reduction="sum")

    params, buffers = stack_module_state(models)  # every tensor gets a leading [K] dimension
    template = copy.deepcopy(models[0]).to("meta")
    stacked = vmap(lambda p, b: loss(functional_call(template, (p, b), (src, lengths, prev))[0]),
                   randomness="different")
    ways = {
        "single": lambda: loss(models[0](src, lengths, prev)[0]).backward(),
        "loop": lambda: sum(loss(m(src, lengths, prev)[0]) for m in models).backward(),
        "vmap": lambda: stacked(params, buffers).sum().backward(),
    }
    ms = {}
    for name, fn in ways.items():
        try:
            fn()
        except RuntimeError as e:  # e.g. a kernel without a batching or autograd rule under vmap
            print(f"{name}: not supported here: {str(e).splitlines()[0]}")
            continue
        times = []
        for _ in range(a.steps):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        ms[name] = 1000 * statistics.median(times)
    K = a.replicas
    print(f"{a.arch}, K={K} replicas, {a.threads} thread(s): forward + backward per step")
    print("| way | ms per step | ms per replica | per replica / single |")
    print("|---|---|---|---|")
    for name, v in ms.items():  # noqa: B007
        per = v / (1 if name == "single" else K)
        print(f"| {name} | {v:.0f} | {per:.0f} | {per / ms['single']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
