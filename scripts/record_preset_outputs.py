"""Record every preset's outputs from fixed weights: the fixture of tests/test_preset_equivalence.py.

    PYTHONPATH=. python scripts/record_preset_outputs.py [tests/fixtures/preset_outputs.pt]

Weights do not come from the model's initialisation (whose order of random draws a refactor may change) but from
the parameter's *name*: each tensor is filled from a generator seeded with crc32(name), so a model whose
state_dict keys and shapes are unchanged gets the same weights whatever order its modules are built in.
Every preset keeps its mechanisms and layer counts but is built at a small width (SMALL: d 32, d_FF 64, 4 heads)
so the test stays fast. Recorded per architecture: a digest of the state_dict keys and shapes, and the
log-probabilities of the full forward pass (eval mode) on fixed, left-padded inputs. Written at commit 0880ec7
(before the positions refactor, modules/positions/).
"""
import hashlib
import sys
import zlib

import torch

from fairseq_compgen.models.standalone import build_model, compgen_archs

PAD = 1
SMALL = dict(encoder_embed_dim=32, decoder_embed_dim=32, encoder_ffn_embed_dim=64, decoder_ffn_embed_dim=64,
             encoder_attention_heads=4, decoder_attention_heads=4)


def keys_digest(model: torch.nn.Module) -> str:
    """sha256 of the state_dict's `name shape` lines, in order."""
    lines = "\n".join(f"{k} {tuple(v.shape)}" for k, v in model.state_dict().items())
    return hashlib.sha256(lines.encode()).hexdigest()


def fill_by_name(model: torch.nn.Module) -> None:
    """Deterministic weights from parameter names (see the module docstring); LayerNorm weights near 1."""
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if not t.is_floating_point():
                continue
            g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
            x = torch.randn(t.shape, generator=g, dtype=torch.float64)
            if "norm" in name and name.endswith("weight"):
                x = 1.0 + 0.1 * x
            else:
                x = x / max(1, t.shape[-1] if t.dim() else 1) ** 0.5
            t.copy_(x.to(t.dtype))


def inputs(model, B=2, S=6, T=5):
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, len(model.encoder.dictionary), (B, S), generator=g)
    src[0, :2] = PAD  # left padding, as fairseq batches sources
    prev = torch.randint(4, len(model.decoder.dictionary), (B, T), generator=g)
    prev[:, 0] = 2  # decoding starts from EOS
    return src, src.ne(PAD).sum(1), prev


def record(arch: str, dtype: torch.dtype = torch.float32) -> dict:
    """The fixture's record of `arch`; with dtype=torch.float64 the same weights (float32 values widen exactly) and
    inputs computed in float64: the function itself, without float32 rounding (tests/test_preset_equivalence.py)."""
    torch.manual_seed(0)
    model = build_model(arch, **SMALL).eval()
    fill_by_name(model)
    model.to(dtype)
    src, lengths, prev = inputs(model)
    with torch.no_grad():
        out = model(src, lengths, prev)
        lprobs = model.get_normalized_probs(out, log_probs=True)  # [B, T, V]
    return {"keys": keys_digest(model), "lprobs": lprobs.clone()}


def main(path="tests/fixtures/preset_outputs.pt"):
    torch.save({arch: record(arch) for arch in compgen_archs()}, path)


if __name__ == "__main__":
    main(*sys.argv[1:])
