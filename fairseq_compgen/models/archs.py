"""Named architectures: presets over the options of `compgen_transformer`. A preset only sets defaults;
every flag given on the command line wins.

Csordás, Irie, Schmidhuber (2021), Table 4. The four model columns of Tables 1 and 3:

    compgen_transformer   "Trafo":            absolute sinusoidal positions (PED scaling), separate layers
    uni_transformer       "Uni. Trafo":       absolute positions, one shared layer per stack
    rel_transformer       "Rel. Trafo":       Transformer-XL relative self-attention, no absolute positions
    rel_uni_transformer   "Rel. Uni. Trafo":  both

and for each a sized preset per dataset, `<column>_<dataset>` for dataset in scan, cfq, pcfg, cogs, math
(e.g. `rel_uni_transformer_scan`). The bare names use the SCAN size. Training hyperparameters of Table 4
(batch, learning rate, schedule, steps) are fairseq-train flags, given by the recipes csordas/<dataset>
(fairseq_compgen/recipes/recipes.yaml; `fairseq-compgen recipes csordas/scan` prints one).
"""
from fairseq.models import register_model_architecture

from fairseq_compgen.models.common import set_default
from fairseq_compgen.modules.positions import registry as position_registry

# Table 4: (d_model, d_FF, heads, layers). COGS: the table prints 8 heads, the authors' code
# (github.com/RobertCsordas/transformer_generalization) uses 4; we follow the table,
# `--encoder-attention-heads 4 --decoder-attention-heads 4` gives the code's setting. CFQ's Universal models use
# their own size.
CSORDAS_SIZES = {
    "scan": (128, 256, 8, 3),
    "cfq": (128, 256, 16, 2),
    "cfq_universal": (256, 512, 4, 6),
    "pcfg": (512, 2048, 8, 6),
    "cogs": (512, 512, 8, 2),
    "math": (512, 2048, 8, 6),
}

COLUMNS = {  # name -> (self-attention position scorer, absolute positions, universal)
    "compgen_transformer": ("none", "sinusoidal", False),
    "uni_transformer": ("none", "sinusoidal", True),
    "rel_transformer": ("txl", "none", False),
    "rel_uni_transformer": ("txl", "none", True),
}
PAPER_NAMES = {"compgen_transformer": "Trafo", "uni_transformer": "Uni. Trafo", "rel_transformer": "Rel. Trafo",
               "rel_uni_transformer": "Rel. Uni. Trafo"}  # the columns of Csordás et al.'s Tables 1 and 3


def paper_name(arch: str) -> str:
    """Csordás et al.'s name of a column arch or its sized preset (rel_uni_transformer_scan -> "Rel. Uni. Trafo");
    any other arch keeps its id."""
    for name, label in PAPER_NAMES.items():
        if arch == name or any(arch == f"{name}_{d}" for d in CSORDAS_SIZES):
            return label
    return arch


def set_size(args, d_model, d_ff, heads, layers):
    for side in ("encoder", "decoder"):
        set_default(args, f"{side}_embed_dim", d_model)
        set_default(args, f"{side}_ffn_embed_dim", d_ff)
        set_default(args, f"{side}_attention_heads", heads)
        set_default(args, f"{side}_layers", layers)


def base_architecture(args):
    """Defaults shared by every preset: Csordás et al.'s base Transformer (App. B and their code) at SCAN size."""
    set_size(args, *CSORDAS_SIZES["scan"])
    for name, value in dict(
        dropout=0.1, attention_dropout=0.1, activation_dropout=0.1, embedding_dropout=None,
        embedding_scaling="ped", param_init="default",
        universal=False, normalize_before=False, attention_bias=False,
        share_decoder_input_output_embed=True, share_all_embeddings=False, encoder_bos=False,
        max_source_positions=1024, max_target_positions=1024,
        self_attn_type="attention", encoder_sag_init=None, decoder_sag_init=None,  # archs_chaabouni.py
        copy_decoder=False,  # archs_ontanon.py
        qk_norm="none",  # archs_park_kim.py
        **position_registry.defaults(),  # --absolute-positions sinusoidal, --self-attn-pos none, --rel-span 4, ...
    ).items():
        set_default(args, name, value)


def _column(scorer, positions, universal, size=None):
    def arch(args):
        set_default(args, "self_attn_pos", scorer)
        set_default(args, "absolute_positions", positions)
        set_default(args, "universal", universal)
        if size is not None:
            set_size(args, *size)
        base_architecture(args)

    return arch


for _name, (_scorer, _positions, _universal) in COLUMNS.items():
    register_model_architecture("compgen_transformer", _name)(_column(_scorer, _positions, _universal))
    for _dataset in ("scan", "cfq", "pcfg", "cogs", "math"):
        _size_key = "cfq_universal" if (_dataset == "cfq" and _universal) else _dataset
        register_model_architecture("compgen_transformer", f"{_name}_{_dataset}")(
            _column(_scorer, _positions, _universal, CSORDAS_SIZES[_size_key])
        )
