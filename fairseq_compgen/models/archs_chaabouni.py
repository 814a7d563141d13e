"""Presets for Chaabouni, Dessì, Kharitonov (2021), "Can Transformers Jump Around Right in Natural Language?
Assessing Performance Transfer from SCAN": the five model columns of Tables 3, 4, 7 and 8,

    chaabouni_transformer        "Transformer":     fairseq-style Transformer, no gate
    sag_transformer              "SAG":             + self-attention gate (Algorithm 1)
    sag_conv_transformer         "+ Conv as s.-a.": SAG, self-attention replaced by a convolution (§3)
    sag_fixed_span_transformer   "+ Fixed-span":    SAG, no self-attention beyond distance s (Eq. 3)
    sag_t5_transformer           "+ T5":            SAG, learned per-head bias of the clipped distance (Eq. 3)

each as `<column>_<setup>` for setup in scan, iwslt_de_en, flores, noun_adj (App. A); the bare names are the
SCAN presets. The non-gated T5 / fixed-span / conv variants are not in any table (§6: without SAG they did
not help): `--encoder-sag-init`/`--decoder-sag-init` are only defaults, so e.g. `--arch chaabouni_transformer
--self-attn-pos t5` builds one.

Choices the paper leaves open (every one a default; the command line wins):
* SCAN (App. A.1 grid: heads {4,8}, d_model {128,256}, d_FF {256,512}, layers {4,6,8}; the best configuration is
  not reported): 4 layers (the only value of the SAG+T5 / SAG+fixed-span grids, within SAG+conv's {4,6}) and
  8 heads (Figure 1, the best SAG+T5 model on SCAN-jump, shows layers 0-3 and heads up to 7); d_model 256,
  d_FF 512 (the larger values of the grid; not reported). beta_0 = -1 in encoder and decoder (A.1: not varied).
  Span s = 4, the middle of the grid {2, 4, 6} (the selected value is not reported).
* MT (App. A.2): beta_0 searched in {-1, 0} (encoder) x {1, 0} (decoder) for IWSLT'14 and noun-adjective,
  {-2, -1, 0} x {2, 1, 0} for FLoRes; we default to -1 / +1 (§3: trained encoder betas end negative, decoder
  betas positive). Span 4 (grid {2, 4, 6}). Attention dropout: 0.0 (grid {0.0, 0.2}) for IWSLT'14 and
  noun-adjective, 0.2 for FLoRes (grid {0.0, 0.2}). Pre-norm where A.2 fixes it (FLoRes); for IWSLT'14 and
  noun-adjective it was a searched option, post-norm (fairseq's default) here, `--normalize-before 1` for pre-norm.
* "Shared embeddings between encoder and decoder" (FLoRes, noun-adjective) needs a joined dictionary:
  add `--share-all-embeddings 1` (as fairseq's own presets, these leave it to the command line).
* "fairseq's Transformer with its initialization and default parameters" (§3): fairseq's embeddings
  (N(0, d^-1/2) scaled by sqrt(d), its sinusoid layout and position offset: `--embedding-scaling fairseq`) and
  layer initialisation (`--param-init fairseq`, modules/param_init.py), biases in the attention projections, no
  activation dropout unless A.2 sets one, untied output embedding unless A.2 ties it (IWSLT'14: decoder input =
  output embedding). Until 2026-11-23 these presets used `teu` embeddings (Xavier, interleaved sinusoids) and
  Xavier layers; `--embedding-scaling teu --param-init default` rebuilds those models.

Training flags are fairseq-train's; SCAN, Table 3's protocol (250 epochs, batch 256, Adam lr 5e-4, clip 1.0,
seeds 0-2, greedy decoding), e.g. for SCAN-jump:

    fairseq-train DATA_BIN --user-dir fairseq_compgen --task compgen --arch sag_t5_transformer \\
        --optimizer adam --lr 5e-4 --clip-norm 1.0 --batch-size 256 --max-epoch 250 --seed 0 \\
        --criterion cross_entropy --valid-subset valid --no-epoch-checkpoints
"""
from fairseq.models import register_model_architecture

from fairseq_compgen.models.archs import base_architecture, set_size
from fairseq_compgen.models.common import set_default

COLUMNS = {  # name -> (self-attention gate, --self-attn-type, --self-attn-pos)
    "chaabouni_transformer": (False, "attention", "none"),
    "sag_transformer": (True, "attention", "none"),
    "sag_conv_transformer": (True, "conv", "none"),
    "sag_fixed_span_transformer": (True, "attention", "fixed_span"),
    "sag_t5_transformer": (True, "attention", "t5"),
}

# setup -> ((d_model, d_FF, heads, layers), (encoder beta_0, decoder beta_0), other defaults). App. A.
SETUPS = {
    "scan": ((256, 512, 8, 4), (-1.0, -1.0),
             dict(dropout=0.1, attention_dropout=0.1, activation_dropout=0.0, rel_span=4)),
    "iwslt_de_en": ((512, 1024, 4, 6), (-1.0, 1.0),  # fairseq's transformer_iwslt_de_en
                    dict(dropout=0.3, attention_dropout=0.0, activation_dropout=0.0, rel_span=4,
                         share_decoder_input_output_embed=True)),
    "flores": ((512, 2048, 2, 5), (-1.0, 1.0),
               dict(dropout=0.4, attention_dropout=0.2, activation_dropout=0.2, rel_span=4, normalize_before=True)),
    "noun_adj": ((1024, 4096, 16, 6), (-1.0, 1.0),  # fairseq's transformer_vaswani_wmt_en_fr_big
                 dict(dropout=0.1, attention_dropout=0.0, activation_dropout=0.0, rel_span=4)),
}

FAIRSEQ_TRANSFORMER = dict(absolute_positions="sinusoidal", embedding_scaling="fairseq", param_init="fairseq",
                           attention_bias=True, share_decoder_input_output_embed=False, universal=False)


def _preset(column: str, setup: str):
    gate, attn_type, attn_pos = COLUMNS[column]
    size, (enc_beta0, dec_beta0), defaults = SETUPS[setup]

    def arch(args):
        set_default(args, "self_attn_type", attn_type)
        set_default(args, "self_attn_pos", attn_pos)
        if gate:
            set_default(args, "encoder_sag_init", enc_beta0)
            set_default(args, "decoder_sag_init", dec_beta0)
        set_size(args, *size)
        for name, value in {**FAIRSEQ_TRANSFORMER, **defaults}.items():
            set_default(args, name, value)
        base_architecture(args)

    return arch


for _column in COLUMNS:
    register_model_architecture("compgen_transformer", _column)(_preset(_column, "scan"))
    for _setup in SETUPS:
        register_model_architecture("compgen_transformer", f"{_column}_{_setup}")(_preset(_column, _setup))
