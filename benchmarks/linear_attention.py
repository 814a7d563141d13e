"""Time and memory of one attention module, linear (Park & Kim 2024 / Katharopoulos et al. 2020) versus softmax,
forward + backward, as the sequence length grows.

    python benchmarks/linear_attention.py                                  # 64 .. 2048, d 512, 8 heads, batch 1
    python benchmarks/linear_attention.py --lengths 64 256 1024 4096 --device cuda --batch 8

Rows: encoder self-attention (non-causal) and decoder self-attention (causal) of
  softmax  = fairseq_compgen MultiheadAttention (torch scaled_dot_product_attention; the backend is torch's choice)
  softmax-explicit = the same module's math written out (scores [B, H, T, T] materialised), the textbook cost
  linear   = LinearAttention with --qk-norm l2 (the normalization costs O(T d))
Time: median over --reps runs of forward + backward (after one warm-up): wall-clock on CUDA, CPU time of the
process (all threads; robust to other jobs sharing the cores) on CPU. Memory: bytes of the tensors autograd
saves for backward (counted through saved_tensors_hooks, each storage once), which is the activation memory that
grows with T on any device; on CUDA also the peak allocated memory of the step.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from fairseq_compgen.modules.attention import MultiheadAttention
from fairseq_compgen.modules.linear_attention import LinearAttention


class ExplicitSoftmax(torch.nn.Module):
    """softmax(QKᵀ/sqrt(d) + mask) V with the score matrix materialised (no fused kernel)."""

    def __init__(self, attn: MultiheadAttention):
        super().__init__()
        self.attn = attn

    def forward(self, x, causal=False):
        a = self.attn
        q, k, v = a._heads(a.q_proj(x)), a._heads(a.k_proj(x)), a._heads(a.v_proj(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * a.scale  # [B, H, T, T]
        if causal:
            T = x.size(1)
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        out = torch.matmul(F.softmax(scores, dim=-1), v)
        return a.out_proj(out.transpose(1, 2).reshape(x.shape))


def saved_bytes(fn):
    seen, total = set(), [0]

    def pack(t):
        key = (t.untyped_storage().data_ptr(), t.device)
        if key not in seen:
            seen.add(key)
            total[0] += t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, total[0]


def measure(module, x, causal, reps, cuda):
    def step():
        module.zero_grad(set_to_none=True)
        xi = x.detach().requires_grad_(True)
        out, nbytes = saved_bytes(lambda: module(xi, causal=causal))
        out.sum().backward()
        return nbytes

    step()  # warm-up
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(reps):
        clock = time.perf_counter if cuda else time.process_time
        t0 = clock()
        nbytes = step()
        if cuda:
            torch.cuda.synchronize()
        times.append(clock() - t0)
    peak = torch.cuda.max_memory_allocated() if cuda else None
    return statistics.median(times), nbytes, peak


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048])
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--kinds", nargs="+", default=["softmax", "softmax-explicit", "linear"])
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    soft = MultiheadAttention(a.dim, a.heads, dropout=0.0).to(dev)
    modules = {"softmax": soft, "softmax-explicit": ExplicitSoftmax(soft),
               "linear": LinearAttention(a.dim, a.heads, "l2").to(dev)}
    print(f"# device {a.device} ({torch.get_num_threads()} threads), batch {a.batch}, d_model {a.dim}, "
          f"{a.heads} heads; forward+backward of one attention module; median of {a.reps}")
    head = f"{'mode':<9} {'kind':<17} " + " ".join(f"{'T=' + str(T):>10}" for T in a.lengths)
    for causal in (False, True):
        mode = "causal" if causal else "encoder"
        rows = {}
        for kind in a.kinds:
            rows[kind] = []
            for T in a.lengths:
                x = torch.randn(a.batch, T, a.dim, device=dev)
                rows[kind].append(measure(modules[kind], x, causal, a.reps, cuda))
        print(f"\n## time (ms, {'wall' if cuda else 'process CPU'}), {mode}\n" + head)
        for kind, r in rows.items():
            print(f"{mode:<9} {kind:<17} " + " ".join(f"{t * 1e3:>10.2f}" for t, _, _ in r))
        print(f"\n## saved activations (MiB), {mode}\n" + head)
        for kind, r in rows.items():
            print(f"{mode:<9} {kind:<17} " + " ".join(f"{b / 2**20:>10.2f}" for _, b, _ in r))
        if cuda:
            print(f"\n## peak allocated (MiB), {mode}\n" + head)
            for kind, r in rows.items():
                print(f"{mode:<9} {kind:<17} " + " ".join(f"{m / 2**20:>10.1f}" for _, _, m in r))


if __name__ == "__main__":
    main()
