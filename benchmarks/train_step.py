"""Train-step time (or, with --decode, greedy decoding time) and peak memory of each registered architecture, as a
ratio to fairseq's stock `transformer` of the same size (d_model, d_FF, heads, layers), measured in the same run.

    python benchmarks/train_step.py                      # the base presets (SCAN size), CPU or GPU
    python benchmarks/train_step.py --archs rel_uni_transformer_cogs compgen_transformer_cogs --batch 128
    python benchmarks/train_step.py --all --json results/bench.json
    python benchmarks/train_step.py --autocast --archs rel_uni_transformer_scan --batch 256 --rounds 3
                                    # each arch against itself under bf16 autocast (--autocast-bf16) instead of stock
    python benchmarks/train_step.py --previous 26562e6 --rounds 3 --archs rel_uni_transformer ...
                                    # also each arch as an earlier commit built it (that commit's fairseq_compgen,
                                    # from `git archive`, loaded through PYTHONPATH), in the same rounds
    python benchmarks/train_step.py --stock-dropouts --archs compgen_transformer
                                    # stock with the arch's dropout probabilities, not fairseq's defaults
    python benchmarks/train_step.py --decode --rounds 3 --archs sag_t5_transformer rel_uni_transformer
                                    # greedy decoding of a batch instead of a training step (below)
    python benchmarks/train_step.py --decode --beam 4 --beam-stop-bound --rounds 3 --archs rel_uni_transformer_scan
                                    # each arch's beam search with --beam-stop bound against fairseq's, same beam

Stock `transformer` keeps fairseq's defaults other than the size: dropout 0.1 but attention and activation dropout 0,
where the Csordás presets use 0.1 for both. Those two dropouts are most of what a SCAN-sized step of ours saves beyond
stock's (the probabilities and their masks at [batch, heads, tgt, src], the feed-forward's masks), so the default
ratios compare different computations; `--stock-dropouts` gives stock the arch's dropout, attention dropout and
activation dropout (the embedding dropout stays stock's: its `dropout`), the same computation up to the mechanisms.

`--decode` times evaluation instead of training: greedy decoding (beam 1, as `fairseq-compgen eval` decodes; --beam
for more) of one batch with fairseq's SequenceGenerator, step by step through each model's incremental state, every
hypothesis held to exactly --tgt-len tokens (min and max length both --tgt-len, then EOS), so every arch decodes the
same number of steps whatever its untrained weights predict; model in eval mode (no dropout), no gradients. "decode
ms" is one batch. `--beam-stop-bound` compares, instead of stock, each arch's decoding by tasks/beam_stop.py's search
(`--beam-stop bound`) with fairseq's SequenceGenerator of the same beam: the same steps, so the ratio is the
search's own cost per step.

Each (arch) is measured in a fresh subprocess, so peak memory is its own: on CUDA the peak allocated memory
during the timed steps, on CPU the growth of the process's peak RSS over the timed steps (activations,
gradients, optimizer state, from before the first warm-up step; the first round's, where --rounds repeats the
time). Time: median over --steps timed steps after --warmup steps (forward, backward,
Adam step) on random tokens of fixed lengths.
"""
import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DROPOUTS = ("dropout", "attention_dropout", "activation_dropout")  # given to stock by --stock-dropouts


def stock_model(e, vocab: int, dropouts: bool = False):
    """fairseq's own transformer at exactly the size of the model whose encoder's args are `e`
    (`model.encoder.args`); with `dropouts`, also with its dropout probabilities."""
    from fairseq_compgen.models.standalone import build_model

    same = {k: getattr(e, k) for k in DROPOUTS if getattr(e, k, None) is not None} if dropouts else {}
    return build_model(
        "transformer", src_words=vocab, tgt_words=vocab,
        encoder_embed_dim=e.encoder_embed_dim, encoder_ffn_embed_dim=e.encoder_ffn_embed_dim,
        encoder_attention_heads=e.encoder_attention_heads, encoder_layers=e.encoder_layers,
        decoder_embed_dim=e.decoder_embed_dim, decoder_ffn_embed_dim=e.decoder_ffn_embed_dim,
        decoder_attention_heads=e.decoder_attention_heads, decoder_layers=e.decoder_layers,
        share_decoder_input_output_embed=True, **same,
    )


def greedy_decoder(model, length: int, beam: int = 1, bound: bool = False):
    """src_tokens, src_lengths -> fairseq's greedy (beam 1) hypotheses of `model`, each exactly `length` tokens and
    EOS: the same number of incremental decoding steps for every arch, whatever its weights predict. `beam`: beam
    search of that width; `bound`: by tasks/beam_stop.py's search instead of fairseq's SequenceGenerator."""
    import torch
    from fairseq.sequence_generator import SequenceGenerator

    from fairseq_compgen.tasks.beam_stop import BoundedBeamSearch

    generator = (BoundedBeamSearch if bound else SequenceGenerator)(
        [model], model.decoder.dictionary, beam_size=beam, max_len_a=0, max_len_b=length, min_len=length)

    @torch.no_grad()
    def decode(src_tokens, src_lengths):
        return generator.generate([model], {"net_input": {"src_tokens": src_tokens, "src_lengths": src_lengths}})
    return decode


def measure(arch: str, stock: bool, a, autocast: bool = False, bound: bool = False) -> dict:
    import torch
    import torch.nn.functional as F

    import fairseq_compgen

    fairseq_compgen.register()
    from fairseq_compgen.models.standalone import build_model

    torch.manual_seed(0)
    dev = torch.device(a.device)
    model = build_model(arch, src_words=a.vocab, tgt_words=a.vocab)
    if stock:  # the preset is built for its sizes only, and freed before stock is: its weights would otherwise sit
        args = model.encoder.args  # in the peak RSS that stock's growth is measured from, understating stock's
        del model
        gc.collect()
        model = stock_model(args, a.vocab, a.stock_dropouts)
    model.to(dev).train(not a.decode)
    V = len(model.decoder.dictionary)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, V, (a.batch, a.src_len), generator=g).to(dev)
    tgt = torch.randint(4, V, (a.batch, a.tgt_len), generator=g).to(dev)
    prev = torch.cat([torch.full_like(tgt[:, :1], 2), tgt[:, :-1]], dim=1)
    lengths = torch.full((a.batch,), a.src_len, device=dev)

    if a.decode:
        decode = greedy_decoder(model, a.tgt_len, a.beam, bound)

        def step():
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
                decode(src, lengths)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):  # as --autocast-bf16 does
                logits, _ = model(src, lengths, prev)
                loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), tgt.reshape(-1))
            loss.backward()
            opt.step()

    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # model and batch built, nothing run yet
    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated() if cuda else (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024
    return {"arch": "transformer" if stock else arch, "autocast_bf16": autocast, "beam_stop_bound": bound, "params": sum(p.numel() for p in model.parameters()),
            "step_ms": 1000 * statistics.median(times), "peak_mb": peak / 2**20,
            "package": str(Path(fairseq_compgen.__file__).resolve().parent)}  # which fairseq_compgen built it


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", nargs="*", help="architectures to measure (default: every preset without a dataset suffix)")
    p.add_argument("--all", action="store_true", help="every registered architecture of this package")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--src-len", type=int, default=16)
    p.add_argument("--tgt-len", type=int, default=32)
    p.add_argument("--vocab", type=int, default=32, help="words per dictionary (plus fairseq's 4 specials)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=1,
                   help="measure (arch, stock) this many times, alternating, and report the median time ratio "
                        "(step times on a shared machine drift between processes; pairs measured back to back do not)")
    p.add_argument("--autocast", action="store_true",
                   help="compare each arch with itself under bf16 autocast (--autocast-bf16), not with stock "
                        "transformer: 'x ref' is then autocast time / fp32 time")
    p.add_argument("--previous", metavar="COMMIT",
                   help="also measure each arch as this commit of the repository builds it (its fairseq_compgen "
                        "through PYTHONPATH), in the same rounds: 'x prev' is this tree's time / that commit's")
    p.add_argument("--stock-dropouts", action="store_true",
                   help="build stock transformer with each arch's dropout, attention dropout and activation dropout "
                        "(default: fairseq's, 0.1 / 0 / 0): the same computation, so the ratios are the code's")
    p.add_argument("--decode", action="store_true",
                   help="time greedy decoding of one batch (beam 1, exactly --tgt-len tokens per hypothesis) instead "
                        "of a training step")
    p.add_argument("--beam", type=int, default=1, help="with --decode: the beam's width (default 1, greedy)")
    p.add_argument("--beam-stop-bound", action="store_true",
                   help="with --decode: compare each arch's decoding by --beam-stop bound's search with fairseq's "
                        "beam search of the same arch and --beam, not with stock: 'x ref' is then bound / fairseq")
    p.add_argument("--device", default="cuda" if _cuda() else "cpu")
    p.add_argument("--json", help="also write the rows as JSON here")
    p.add_argument("--_one", nargs=2, metavar=("ARCH", "STOCK"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.decode and a.stock_dropouts:
        p.error("--stock-dropouts has no effect with --decode: no dropout at evaluation")
    if (a.beam != 1 or a.beam_stop_bound) and not a.decode:
        p.error("--beam and --beam-stop-bound time decoding: add --decode")
    if a.beam_stop_bound and a.autocast:
        p.error("--beam-stop-bound and --autocast each choose the reference: one at a time")
    if a._one:
        print(json.dumps(measure(a._one[0], a._one[1] == "1", a, a._one[1] == "autocast", a._one[1] == "bound")))
        return
    from fairseq_compgen.pipelines.train import commit
    started_at = commit()  # read before measuring: a commit made while it runs must not be recorded instead
    import fairseq_compgen
    fairseq_compgen.register()
    from fairseq_compgen.models.standalone import compgen_archs

    suffixes = ("_scan", "_cfq", "_pcfg", "_cogs", "_math", "_iwslt", "_flores", "_noun_adj")
    archs = a.archs or [x for x in compgen_archs() if a.all or not x.endswith(suffixes)]
    passthrough = [f"--{k.replace('_', '-')}={getattr(a, k)}" for k in
                   ("batch", "src_len", "tgt_len", "vocab", "warmup", "steps", "device", "beam")]
    passthrough += ["--stock-dropouts"] if a.stock_dropouts else []
    passthrough += ["--decode"] if a.decode else []

    previous = _export_package(a.previous, tempfile.mkdtemp(prefix="train_step_prev_")) if a.previous else None

    def run(arch, kind, package_root=None):
        """kind: "0" the arch, "1" stock transformer of its size, "autocast" the arch under autocast, "bound" the
        arch decoded by --beam-stop bound's search; package_root:
        a folder holding another fairseq_compgen to build it with (PYTHONPATH comes before the installed one)."""
        env = dict(os.environ)
        if package_root:
            env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
        out = subprocess.run([sys.executable, __file__, "--_one", arch, kind, *passthrough],
                             capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(f"train_step.py: measuring {arch} ({'stock' if kind == '1' else kind}"
                             f"{', ' + a.previous if package_root else ''}) failed: "
                             f"{(out.stderr.strip().splitlines() or ['no output'])[-1]}")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        if package_root and not r["package"].startswith(package_root):
            raise SystemExit(f"train_step.py: --previous measured {r['package']}, not the package under {package_root}")
        return r

    # each row: the measured (arch, under autocast, or decoded by --beam-stop bound's search) against its reference
    # (stock, or the arch in fp32, or the arch decoded by fairseq's search)
    measured, reference = ("autocast", "0") if a.autocast else ("bound", "0") if a.beam_stop_bound else ("0", "1")
    rows, ref_cache = [], {}
    threads = os.environ.get("OMP_NUM_THREADS", os.cpu_count())
    ref_name = "fp32" if a.autocast else "fairseq" if a.beam_stop_bound else "stock"
    stock_name = "stock transformer" + (" with each arch's dropouts" if a.stock_dropouts else "")
    print(f"device={a.device} batch={a.batch} src_len={a.src_len} tgt_len={a.tgt_len} threads={threads} "
          f"timed: {_timed(a)}, "
          f"{'measured: bf16 autocast, reference: the same arch in fp32' if a.autocast else 'measured: --beam-stop bound, reference: the same arch and beam, fairseq SequenceGenerator' if a.beam_stop_bound else 'reference: ' + stock_name}")
    if previous:
        print(f"previous: {a.previous} ({previous['commit'][:12]}), its package under {previous['root']}")
    installed, here = _installed_package(), Path(__file__).resolve().parents[1] / "fairseq_compgen"
    if installed != here:  # a clone timed with another checkout's environment (a reviewer's found so, 2026-11-29)
        print(f"note: this times the fairseq_compgen that Python imports, {installed}, not this checkout's ({here}); "
              f"install this checkout (bash scripts/setup.sh, or pip install -e .) to time its code")
    timed = "decode ms" if a.decode else "step ms"
    print(f"{'arch':34s} {'params':>10s} {timed:>9s} {'x ' + ref_name:>8s} {'peak MB':>9s} {'x ' + ref_name:>8s}"
          + (f" {'x prev':>7s}" if previous else ""))
    for arch in archs:
        e = arch if a.autocast or a.beam_stop_bound else _size_key(arch, a.stock_dropouts)
        pairs, prev_pairs = [], []
        for _ in range(a.rounds):  # back to back, so they all see the same machine load
            r = run(arch, measured)
            if previous and arch in previous["archs"]:
                prev_pairs.append((r, run(arch, measured, previous["root"])))
            s = run(arch, reference) if a.rounds > 1 or e not in ref_cache else ref_cache[e]
            ref_cache.setdefault(e, s)  # one stock measurement per distinct size when --rounds 1
            pairs.append((r, s))
        r, s = pairs[0]
        r["step_ms"] = statistics.median(x["step_ms"] for x, _ in pairs)
        r["ref_step_ms"], r["ref_peak_mb"] = statistics.median(y["step_ms"] for _, y in pairs), s["peak_mb"]
        r["reference"] = ref_name
        r["stock_dropouts"] = a.stock_dropouts  # stock built with this arch's dropouts (else fairseq's defaults)
        r.update(_ratios(pairs))
        r["memory_ratio"] = r["peak_mb"] / s["peak_mb"] if s["peak_mb"] > 0 else float("nan")
        vs_prev = "" if not previous else f" {'(new)':>7s}"  # an arch the earlier commit does not have
        if prev_pairs:
            r["previous"] = {"commit": previous["commit"],
                             "step_ms": statistics.median(y["step_ms"] for _, y in prev_pairs),
                             "params": prev_pairs[0][1]["params"], "peak_mb": prev_pairs[0][1]["peak_mb"],
                             **_ratios(prev_pairs),
                             "time_ratio_to_ref": statistics.median(y["step_ms"] / z["step_ms"]
                                                                    for (_, y), (_, z) in zip(prev_pairs, pairs))}
            vs_prev = f" {r['previous']['time_ratio']:7.2f}"
        rows.append(r)
        print(f"{arch:34s} {r['params']:>10,d} {r['step_ms']:9.1f} {r['time_ratio']:8.2f} "
              f"{r['peak_mb']:9.1f} {r['memory_ratio']:8.2f}{vs_prev}", flush=True)
    if previous:
        shutil.rmtree(previous["root"], ignore_errors=True)
    if a.json:
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            from fairseq_compgen.pipelines import train

            json.dump({"device": a.device, "command": " ".join(sys.argv), "commit": started_at,
                       "timed": "decode" if a.decode else "train_step", "beam": a.beam,
                       "previous": previous and previous["commit"],
                       "machine": json.loads(train.machine(a.device == "cpu")), "rows": rows}, f, indent=1)
        os.replace(tmp, a.json)


def _timed(a) -> str:
    if not a.decode:
        return "one training step"
    return "greedy decoding of one batch" if a.beam == 1 else f"beam search (beam {a.beam}) of one batch"


def _ratios(pairs) -> dict:
    """(measured, reference) rows of each round -> the median step-time ratio and each round's."""
    ratios = [x["step_ms"] / y["step_ms"] for x, y in pairs]
    return {"time_ratio": statistics.median(ratios), "time_ratios": [round(q, 3) for q in ratios]}


def _installed_package() -> "Path | None":
    """The fairseq_compgen folder the measuring subprocesses import (PYTHONPATH and the installed one), unimported."""
    import importlib.util

    spec = importlib.util.find_spec("fairseq_compgen")
    return Path(spec.origin).resolve().parent if spec and spec.origin else None


def _export_package(ref: str, root: str) -> dict:
    """This repository's fairseq_compgen as commit `ref` has it, written under `root` (git archive: no checkout, the
    working tree untouched); with the full commit and the architectures that package registers."""
    repo = Path(__file__).resolve().parents[1]
    try:
        full = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", f"{ref}^{{commit}}"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit(f"train_step.py: --previous {ref}: not a commit of {repo}")
    archive = subprocess.run(["git", "-C", str(repo), "archive", full, "fairseq_compgen"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
    listed = subprocess.run([sys.executable, "-c", "import fairseq_compgen as f; f.register(); "
                             "from fairseq_compgen.models.standalone import compgen_archs; print(*compgen_archs())"],
                            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=root), cwd=root)
    if listed.returncode:
        raise SystemExit(f"train_step.py: --previous {ref}: its fairseq_compgen does not load here: "
                         f"{(listed.stderr.strip().splitlines() or ['no output'])[-1]}")
    return {"commit": full, "root": root, "archs": set(listed.stdout.split())}


def _size_key(arch: str, dropouts: bool = False):
    """What the stock reference of `arch` is built from: its size, and its dropouts with --stock-dropouts."""
    import fairseq_compgen
    fairseq_compgen.register()
    from fairseq_compgen.models.standalone import build_model

    e = build_model(arch).encoder.args
    if not hasattr(e, "encoder_embed_dim"):
        raise SystemExit(f"train_step.py: {arch} is not a Transformer (no --encoder-embed-dim): no stock transformer "
                         f"of its size to compare with")
    return tuple(getattr(e, f"{side}_{k}") for side in ("encoder", "decoder")
                 for k in ("embed_dim", "ffn_embed_dim", "attention_heads", "layers")) + \
        (tuple(getattr(e, k, None) for k in DROPOUTS) if dropouts else ())


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


if __name__ == "__main__":
    main()
