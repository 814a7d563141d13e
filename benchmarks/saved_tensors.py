"""What a training step keeps for backward, per module type: each arch against fairseq's stock `transformer` of its
size (as benchmarks/train_step.py builds it), one forward in training mode at train_step.py's batch.

    python benchmarks/saved_tensors.py --archs compgen_transformer rel_uni_transformer
    python benchmarks/saved_tensors.py --stock-dropouts --detail 12      # stock with the arch's dropouts; the 12
                                                                          # largest saved tensors of each model

Counted through torch.autograd.graph.saved_tensors_hooks: each storage once (views of one tensor, or one tensor saved
by several operations, count once), parameters not at all (they are there with or without a step). A tensor is
charged to the innermost module running when it is saved, by class name: fairseq's attention calls F.linear inside
its MultiheadAttention where ours calls nn.Linear modules, so compare the totals; the rows say where.
This is the activation memory of the step, the part of train_step.py's peak that depends on the code (its CPU peak
RSS adds gradients, Adam's state, temporaries of backward and the allocator's own overhead).
"""
import argparse
import collections

import torch
import torch.nn.functional as F

from train_step import stock_model


def saved_per_module(model, src, tgt) -> tuple:
    """One forward and loss of `model` in training mode -> ({module class: bytes}, {(class, dtype, shape): bytes})."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    running = ["loss"]  # the innermost module running; outside every module: the loss

    def enter(module, args):
        running.append(type(module).__name__)

    def leave(module, args, out):
        running.pop()

    hooks = [h for m in model.modules() for h in (m.register_forward_pre_hook(enter), m.register_forward_hook(leave))]
    seen, per_module, per_tensor = set(), collections.Counter(), collections.Counter()

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params and ptr not in seen:
            seen.add(ptr)
            per_module[running[-1]] += t.untyped_storage().nbytes()
            per_tensor[(running[-1], str(t.dtype).replace("torch.", ""), tuple(t.shape))] += t.untyped_storage().nbytes()
        return t

    prev = torch.cat([torch.full_like(tgt[:, :1], model.decoder.dictionary.eos()), tgt[:, :-1]], dim=1)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            logits, _ = model.train()(src, torch.full((src.size(0),), src.size(1)), prev)
            F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), tgt.reshape(-1))
    finally:
        for h in hooks:
            h.remove()
    return per_module, per_tensor


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", nargs="+", default=["compgen_transformer"])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--src-len", type=int, default=16)
    p.add_argument("--tgt-len", type=int, default=32)
    p.add_argument("--vocab", type=int, default=32, help="words per dictionary (plus fairseq's 4 specials)")
    p.add_argument("--stock-dropouts", action="store_true",
                   help="stock with each arch's dropout, attention dropout and activation dropout (train_step.py's)")
    p.add_argument("--detail", type=int, default=0, metavar="N", help="also the N largest saved tensors of each model")
    a = p.parse_args(argv)
    import fairseq_compgen

    fairseq_compgen.register()
    from fairseq_compgen.models.standalone import build_model

    g = torch.Generator().manual_seed(0)
    for arch in a.archs:
        torch.manual_seed(0)
        ours = build_model(arch, src_words=a.vocab, tgt_words=a.vocab)
        V = len(ours.decoder.dictionary)
        src = torch.randint(4, V, (a.batch, a.src_len), generator=g)
        tgt = torch.randint(4, V, (a.batch, a.tgt_len), generator=g)
        for name, model in [("stock transformer" + (" (arch's dropouts)" if a.stock_dropouts else ""),
                             stock_model(ours.encoder.args, a.vocab, a.stock_dropouts)), (arch, ours)]:
            torch.manual_seed(0)
            per_module, per_tensor = saved_per_module(model, src, tgt)
            print(f"{name}: {sum(per_module.values()) / 2**20:.2f} MiB saved for backward")
            for module, n in per_module.most_common():
                print(f"  {module:32s} {n / 2**20:8.2f}")
            for (module, dtype, shape), n in per_tensor.most_common(a.detail):
                print(f"    {n / 2**20:7.2f}  {module} {dtype} {list(shape)}")


if __name__ == "__main__":
    main()
