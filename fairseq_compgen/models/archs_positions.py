"""Presets for the position encodings of length-generalization studies since 2021, at the Csordás et al. SCAN size
(d 128, d_FF 256, 8 heads, 3 layers; archs.py), everything else as `compgen_transformer`. Each differs from the
others only in its position encodings (modules/positions/, `fairseq-compgen help` lists the papers):

    nope_transformer_scan      no position signal anywhere (NoPE, Kazemnejad et al. 2023): the decoder's causal
                               mask carries order, the encoder sees a bag of tokens
    learned_transformer_scan   learned absolute positions (Gehring et al. 2017), fairseq's embedding scaling
    alibi_transformer_scan     ALiBi in every self-attention (Press et al. 2022; symmetric in the encoder)
    rope_transformer_scan      RoPE in every self-attention (Su et al. 2021)
    xpos_transformer_scan      RoPE in the encoder, xPos in the causal decoder (Sun et al. 2023)
    fire_transformer_scan      FIRE in every self-attention (Li et al. 2024; symmetric in the encoder)
    cope_transformer_scan      RoPE in the encoder, CoPE in the causal decoder (Golovneva et al. 2024)
    random_rope_transformer_scan   RoPE with randomized positions, N = 128 (Ruoss et al. 2023): SCAN's longest
                               sequence (49 tokens with EOS) stays well inside [0, N); sampled in training only,
                               evaluation on 0..T-1 (the paper samples at evaluation too: positions/randomized.py)

Cross-attention has no position encoding in any of them. Train them with the recipe csordas/scan
(`fairseq-compgen train --recipe csordas/scan ARCH DATA SAVE`).
"""
from fairseq.models import register_model_architecture

from fairseq_compgen.models.archs import CSORDAS_SIZES, base_architecture, set_size
from fairseq_compgen.models.common import set_default

PRESETS = {  # name -> flags it defaults
    "nope_transformer": dict(absolute_positions="none", self_attn_pos="none"),
    "learned_transformer": dict(absolute_positions="learned", embedding_scaling="fairseq", self_attn_pos="none"),
    "alibi_transformer": dict(absolute_positions="none", self_attn_pos="alibi"),
    "rope_transformer": dict(absolute_positions="none", self_attn_pos="rope"),
    "xpos_transformer": dict(absolute_positions="none", encoder_self_attn_pos="rope", decoder_self_attn_pos="xpos"),
    "fire_transformer": dict(absolute_positions="none", self_attn_pos="fire"),
    "cope_transformer": dict(absolute_positions="none", encoder_self_attn_pos="rope", decoder_self_attn_pos="cope"),
    "random_rope_transformer": dict(absolute_positions="none", self_attn_pos="rope", random_positions=128),
}


def _preset(flags):
    def arch(args):
        for name, value in flags.items():
            set_default(args, name, value)
        set_size(args, *CSORDAS_SIZES["scan"])
        base_architecture(args)

    return arch


for _name, _flags in PRESETS.items():
    register_model_architecture("compgen_transformer", f"{_name}_scan")(_preset(_flags))
