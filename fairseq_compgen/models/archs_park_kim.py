"""Presets for Park & Kim (2024), "Improving Systematic Generalization of Linear Transformer Using Normalization
Layers and Orthogonality Loss Function" (Mathematics 12(21) 3390), encoder-decoder tasks:

    linear_uni_transformer_<task>        "Linear Transformer, Normalization ✗"    (vanilla LT, phi = elu + 1)
    linear_rms_uni_transformer_<task>    "Linear Transformer, Normalization RMS"
    linear_l1_uni_transformer_<task>     "Linear Transformer, Normalization L1"
    linear_l2_uni_transformer_<task>     "Linear Transformer, Normalization L2"

for task in scan (Table 4, SCAN length cutoff 26), math (Tables 5-6, add_or_sub and place_value), pcfg (Table 7,
systematicity). The "Orth. loss ✓" rows are the same archs trained with the criterion
`label_smoothed_cross_entropy_with_orthogonality --orthogonality-lambda 1e-4` (criterions/orthogonality.py);
"✗" rows use `--criterion cross_entropy`. So Table 4's row "L2 ✓" = `linear_l2_uni_transformer_scan` + that
criterion. Sort-of-CLEVR (Tables 1-3) is an image task outside the seq2seq pipeline and is not covered.

Backbone (§5, "following Csordás et al. [20]"): the Universal Transformer of `uni_transformer` (one encoder layer
and one decoder layer, each applied n times; absolute sinusoidal positions; post-LN; tied output embedding), with
every attention replaced by linear attention (modules/linear_attention.py). Sizes, as stated by the paper and
equal to Csordás et al.'s Table 4 profiles:
    scan: 3 shared layers, 8 heads, d_model 128 (d_FF 256)
    math: 6 shared layers, 8 heads, d_model 512 (d_FF 2048)
    pcfg: 6 shared layers, 8 heads, d_model 512 (d_FF 2048)
d_FF, dropout (0.1, this project's base) and the positional scheme are not stated by the paper: they are the
project's `uni_transformer_<task>` defaults.

Training (§5): Adam, token-wise cross-entropy (no label smoothing), constant lr; batch 256 / lr 1e-3 / 50k steps
(SCAN), 256 / 1e-4 / 50k (Math), 64 / 1e-4 / 300k (PCFG); lambda = 1e-4, orthogonality loss on the encoder only.
The recipes csordas/scan, csordas/math and csordas/pcfg set exactly these batch / lr / steps (plus Csordás et
al.'s gradient clipping: 5 / 0.1 / 1, which the paper does not state); extra flags override their criterion.
Table 4, one seed:

    # Linear Transformer, L2, orthogonality loss ✓ (paper: OOD 56.3 ± 5.4)
    fairseq-compgen train --recipe csordas/scan linear_l2_uni_transformer_scan data/scan/length_cutoff_26/bin \\
        runs/lt_l2_orth_s1 --seed 1 --criterion label_smoothed_cross_entropy_with_orthogonality \\
        --orthogonality-lambda 1e-4
    # Linear Transformer, no normalization, no orthogonality loss (paper: OOD 46.9 ± 8.9)
    fairseq-compgen train --recipe csordas/scan linear_uni_transformer_scan data/scan/length_cutoff_26/bin runs/lt_s1 --seed 1

(`--dry-run` prints the fairseq-train command.) Math: `fairseq-compgen train --recipe csordas/math
linear_l1_uni_transformer_math ...` (batch 256, lr 1e-4, 50k, clip 0.1); PCFG: `--recipe csordas/pcfg`
(batch 64, lr 1e-4, 300k, clip 1).
Report mean ± population std over 5 seeds (Section 6, "five trials"; the std that reproduces Table 1's values), sequence exact match, last checkpoint.
"""
from fairseq.models import register_model_architecture

from fairseq_compgen.models.archs import CSORDAS_SIZES, _column
from fairseq_compgen.models.common import set_default

PARK_KIM_TASKS = ("scan", "math", "pcfg")
PARK_KIM_NORMS = {"linear_uni_transformer": "none", "linear_rms_uni_transformer": "rms",
                  "linear_l1_uni_transformer": "l1", "linear_l2_uni_transformer": "l2"}


def _linear(qk_norm, size):
    universal = _column("none", "sinusoidal", True, size)  # the `uni_transformer` column (Csordás et al.)

    def arch(args):
        set_default(args, "self_attn_type", "linear")
        set_default(args, "qk_norm", qk_norm)
        universal(args)

    return arch


for _name, _norm in PARK_KIM_NORMS.items():
    for _task in PARK_KIM_TASKS:
        register_model_architecture("compgen_transformer", f"{_name}_{_task}")(_linear(_norm, CSORDAS_SIZES[_task]))
