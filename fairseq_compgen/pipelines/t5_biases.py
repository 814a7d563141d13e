"""Plot the learned T5 relative-position biases of a checkpoint after a softmax over distances, per head and
layer: Figure 1 of Chaabouni, Dessì, Kharitonov (2021), App. C,

    b_hat_d = exp(b_d) / sum_d' exp(b_d')        d = j - i clipped to [-s, s]

for every head (rows) of every encoder and decoder layer (one panel each). The decoder can only attend to
d <= 0 (causal mask), so, as in the paper's figure, its panels show d <= 0 and the softmax runs over those.
The border columns stand for every distance beyond the span ("<=-s", ">=s").

    fairseq-compgen plot t5-biases checkpoints/checkpoint_last.pt -o t5_biases.png

It also prints, per layer, the self-attention gate where the model has one (Algorithm 1: the output scaled by
sigma(beta); §3 reports trained encoder betas of -2..-0.5 and decoder betas of 0.2..4.5 growing with depth) and each
head's preferred distance with its weight (uniform: 1 / the number of reachable distances).

Works on any fairseq checkpoint of a model with `--self-attn-pos t5` (or a bare state dict), read with the safe
loader (fairseq_compgen/checkpoint_loading.py).
"""
import argparse
import re
from pathlib import Path
from typing import Dict, List, Tuple

import torch

from fairseq_compgen.checkpoint_loading import checkpoint_file, load
from fairseq_compgen.data.io import staged_path
from fairseq_compgen.errors import UsageError

KEY = re.compile(r"^(encoder|decoder)\.stack\.layers\.(\d+)\.self_attn\.scorer\.relative_bias$")


def relative_biases(state_dict: Dict[str, torch.Tensor]) -> Dict[Tuple[str, int], torch.Tensor]:
    """{(stack, layer): bias [H, 2s+1]} for every T5 scorer in a model state dict."""
    found = {}
    for name, value in state_dict.items():
        m = KEY.match(name)
        if m:
            found[(m.group(1), int(m.group(2)))] = value.detach().float().cpu()
    return found


def preferences(bias: torch.Tensor, causal: bool) -> Tuple[List[str], torch.Tensor]:
    """bias [H, 2s+1] (column d + s) -> (tick labels, softmax over the reachable distances [H, n])."""
    span = (bias.size(1) - 1) // 2
    distances = list(range(-span, 1 if causal else span + 1))
    labels = [f"<={d}" if d == -span else (f">={d}" if d == span else str(d)) for d in distances]
    return labels, torch.softmax(bias[:, : len(distances)], dim=-1)


def summary(state_dict: Dict[str, torch.Tensor]) -> List[str]:
    """One line per encoder, then decoder layer with a T5 scorer: its SAG gate (beta, sigmoid(beta)) if any, and each
    head's preferred distance and softmax weight over the reachable distances ("uniform" for a head without one)."""
    lines = []
    for (stack, layer), bias in sorted(relative_biases(state_dict).items(), key=lambda kv: (kv[0][0] != "encoder", kv[0])):
        labels, pref = preferences(bias, causal=stack == "decoder")
        beta = state_dict.get(f"{stack}.stack.layers.{layer}.gate.beta")
        gate = (f"gate beta {beta.item():+.3f}, sigmoid {torch.sigmoid(beta.float()).item():.3f}; "
                if beta is not None else "")
        weight, where = pref.max(-1)
        flat = (weight - pref.min(-1).values).le(1e-6).tolist()  # no preference: said so, not its first distance
        heads = ", ".join(f"{'uniform' if f else labels[i]}: {w:.2f}"
                          for w, i, f in zip(weight.tolist(), where.tolist(), flat))
        lines.append(f"{stack} layer {layer}: {gate}heads' preferred distance: {heads}")
    return lines


def plot(biases: Dict[Tuple[str, int], torch.Tensor], out_path: str, title: str = "") -> None:
    from fairseq_compgen.pipelines.plotting import pyplot

    plt = pyplot()
    stacks = [s for s in ("encoder", "decoder") if any(k[0] == s for k in biases)]
    layers = sorted({k[1] for k in biases})
    fig, axes = plt.subplots(len(layers), len(stacks), figsize=(4.5 * len(stacks), 2.6 * len(layers)),
                             squeeze=False)
    for col, stack in enumerate(stacks):
        for row, layer in enumerate(layers):
            ax = axes[row][col]
            if (stack, layer) not in biases:
                ax.axis("off")
                continue
            labels, pref = preferences(biases[(stack, layer)], causal=stack == "decoder")
            im = ax.imshow(pref.numpy(), aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_xticks(range(len(labels)), labels, fontsize=7)
            ax.set_yticks(range(pref.size(0)))
            ax.set_title(f"{stack} layer {layer}", fontsize=9)
            ax.set_xlabel("relative distance j - i", fontsize=8)
            ax.set_ylabel("head", fontsize=8)
            fig.colorbar(im, ax=ax)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    with staged_path(out_path) as tmp:  # no half-written plot
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="fairseq checkpoint (.pt) or a saved state dict")
    p.add_argument("-o", "--output", default="t5_biases.png", help="PNG to write (default: %(default)s)")
    a = p.parse_args(argv)
    checkpoint_file(a.checkpoint)
    ckpt = load(a.checkpoint)  # the safe loader: a checkpoint holding code is refused (checkpoint_loading.py)
    state_dict = ckpt["model"] if isinstance(ckpt, dict) and "model" in ckpt else ckpt
    biases = relative_biases(state_dict)
    if not biases:
        raise UsageError(f"{a.checkpoint}: no T5 relative biases found (expected a model trained with "
                         f"--self-attn-pos t5)")
    where = "/".join(Path(a.checkpoint).resolve().parts[-3:])  # e.g. sag_t5/seed1/checkpoint_last.pt: a run's name
    plot(biases, a.output, title=f"T5 biases after a softmax over distances: {where}")
    print("\n".join(summary(state_dict)))
    print(f"wrote {a.output} ({len(biases)} attention modules)")


if __name__ == "__main__":
    main()
