"""Presets for Ontañón, Ainslie, Cvicek, Fisher (2022), "Making Transformers Solve Compositional Tasks":
the 22 model rows of Tables 8-11 (App. B, C), as `ontanon_<row>` with "-" written "_":

    ontanon_abs                    abs        sinusoidal absolute positions
    ontanon_rel_e / _b / _eb       rel-*      relative labels (radius 16) in self-attention; cross-attention gets
                                              the constant label l_0 (the authors' code: no position information,
                                              but the tables exist, so Table 11's counts match)
    ontanon_rel2_e / _b / _eb      rel2-*     relative labels in decoder-to-encoder attention too
    ontanon_abs_c, ontanon_rel_eb_c, ontanon_rel2_eb_c                      -c: copy decoder
    ontanon_small_{2,4,6}[s], ontanon_large_{2,4,6}[s]                      rel2-eb-c at size small (64/256/4) or
                                              large (128/512/8) with 2/4/6 layers; s: one encoder layer and one
                                              decoder layer shared across depths (`--universal`)
    ontanon_large_2_code           the authors' code's "large-2", which has 4 layers (its seq2seq.ipynb;
                                   Table 11's 1.88m = large-4). `ontanon_large_2` has 2 layers, as the paper says.

Common to all (App. A and the authors' code): post-LN, biases in the Q/K/V/O projections, dropout 0.1 on embeddings and
sublayer outputs, no attention or feed-forward-inner dropout, separate encoder / decoder embeddings and a separate
output projection with bias. The Keras initialisation that App. A says strongly affects results: token embeddings
U[-0.05, 0.05] scaled by sqrt(d) in every model (`--embedding-scaling keras`; `abs` then adds the sinusoid), every
dense layer Glorot-uniform with zero biases and LayerNorm eps 1e-6 (`--param-init keras`, modules/param_init.py).
The copy decoder needs a joined dictionary (`fairseq-preprocess --joined-dictionary`, the paper's unified
vocabulary; prepare data with `--joined-dictionary`).

Not reproduced (documented deviation): fairseq sources have no [START] token (the decoder starts from EOS, which
plays [START]). Until 2026-11-23 the presets used Xavier/PyTorch initialisers, LayerNorm eps 1e-5 and unscaled
embeddings in rel-* models (`--embedding-scaling teu --param-init default` rebuilds those models).

Training (Section 4, App. A: the TensorFlow tutorial's defaults): Adam(0.9, 0.98, eps 1e-9), the inverse-sqrt schedule with 4000 warmup steps at peak
d^-0.5 * 4000^-0.5, batch 64, no clipping, no label smoothing, Table 7's epochs, e.g.

    fairseq-train DATA_BIN --user-dir fairseq_compgen --task compgen --arch ontanon_rel2_eb_c \\
        --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-9 --lr 1.976e-3 --lr-scheduler inverse_sqrt \\
        --warmup-updates 4000 --warmup-init-lr 0 --batch-size 64 --max-epoch 2 --criterion cross_entropy
"""
from fairseq.models import register_model_architecture

from fairseq_compgen.models.archs import base_architecture, set_size
from fairseq_compgen.models.common import set_default

SMALL = (64, 256, 4)  # d, f, h (d_h = 16)
LARGE = (128, 512, 8)

COMMON = dict(dropout=0.1, attention_dropout=0.0, activation_dropout=0.0, embedding_dropout=0.1,
              attention_bias=True, normalize_before=False, share_decoder_input_output_embed=False,
              share_all_embeddings=False, embedding_scaling="keras", param_init="keras", rel_radius=16)

# position encoding -> (absolute positions, self-attention scorer, cross-attention scorer)
POSITIONS = {
    "abs": ("sinusoidal", "none", "none"),
    **{f"rel-{k}": ("none", f"rel-{k}", f"rel0-{k}") for k in ("e", "b", "eb")},
    **{f"rel2-{k}": ("none", f"rel-{k}", f"rel-{k}") for k in ("e", "b", "eb")},
}

# table row -> (position encoding, copy decoder, (d, f, h), layers, shared)
CONFIGS = {
    **{pos: (pos, False, SMALL, 2, False) for pos in POSITIONS},
    "abs-c": ("abs", True, SMALL, 2, False),
    "rel-eb-c": ("rel-eb", True, SMALL, 2, False),
    "rel2-eb-c": ("rel2-eb", True, SMALL, 2, False),
    **{f"{name}-{n}{s}": ("rel2-eb", True, size, n, bool(s))
       for name, size in (("small", SMALL), ("large", LARGE)) for n in (2, 4, 6) for s in ("", "s")},
    "large-2-code": ("rel2-eb", True, LARGE, 4, False),
}


def arch_name(row: str) -> str:
    return "ontanon_" + row.replace("-", "_")


def _preset(row: str):
    return _preset_from(*CONFIGS[row])


def _preset_from(pos, copy, size, layers, shared):
    (d, f, h), (absolute, self_pos, cross_pos) = size, POSITIONS[pos]

    def arch(args):
        set_size(args, d, f, h, layers)
        for name, value in dict(absolute_positions=absolute, self_attn_pos=self_pos, cross_attn_pos=cross_pos,
                                copy_decoder=copy, universal=shared, **COMMON).items():
            set_default(args, name, value)
        base_architecture(args)

    return arch


for _row in CONFIGS:
    register_model_architecture("compgen_transformer", arch_name(_row))(_preset(_row))

# COGS as sequence tagging (§4.5.1), for the encoder-only `compgen_tagger` (fairseq_compgen/models/tagger.py): the
# 12 tagging columns of Table 12 (C7-C18) as `ontanon_tagging_<pos>_<size>_<parent head>`: `abs` at small-2 /
# small-6 (unshared) and `rel-eb` at small-2s / small-6s (shared), each with the absolute, relative or attention
# parent head. Table 5 reports C7 (ontanon_tagging_abs_small_2_absolute, 0.637) and C17
# (ontanon_tagging_rel_eb_small_2s_attention, 0.784; also registered under its earlier name
# ontanon_tagging_rel_eb_small_2s).
TAGGING_COLUMNS = {
    f"{pos}-{size}-{parent}": (pos, n, shared, parent)
    for pos, shared in (("abs", False), ("rel-eb", True))
    for parent in ("absolute", "relative", "attention")
    for n in (2, 6)
    for size in [f"small-{n}" + ("s" if shared else "")]
}  # in Table 12's column order


def _tagging_preset(pos, layers, shared, parent):
    encoder = _preset_from(pos, False, SMALL, layers, shared)

    def arch(args):
        set_default(args, "tagger_parent_head", parent)
        encoder(args)

    return arch


for _col, _cfg in TAGGING_COLUMNS.items():
    register_model_architecture("compgen_tagger", "ontanon_tagging_" + _col.replace("-", "_"))(_tagging_preset(*_cfg))
register_model_architecture("compgen_tagger", "ontanon_tagging_rel_eb_small_2s")(
    _tagging_preset("rel-eb", 2, True, "attention"))
