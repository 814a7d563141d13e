"""Position encodings: one file per family, one registry (registry.py) from which the model's position flags,
their help, choices and defaults and `fairseq-compgen help`'s table are generated.

Where an encoding acts (`registry.py`): INPUT (absolute positions added to the embeddings, `--absolute-positions`),
ENCODER_SELF / DECODER_SELF (`--self-attn-pos`, or per side `--encoder-self-attn-pos` / `--decoder-self-attn-pos`)
and CROSS (`--cross-attn-pos`). What an attention encoding may do (`base.AttentionPosition`, every hook optional):
rotate queries and keys (RoPE), change the content query (Transformer-XL's u), add a bias to the logits that may
depend on queries, keys and positions (relative biases, ALiBi, FIRE, CoPE). The attention core
(modules/attention.py) calls these hooks and never names an encoding.

Add your own encoding: one file, e.g. `my_bias.py` in a `--user-dir` plugin (imported before the model is built):

    import torch
    from fairseq_compgen.modules.positions import (AttentionPosition, DECODER_SELF, ENCODER_SELF, Option,
                                                   register_position)

    WIDTH = Option("my_width", "width", float, 1.0, "the width of my bias")   # flag --my-width

    @register_position("my_bias", sites=(ENCODER_SELF, DECODER_SELF), paper="Me et al. 2025",
                       help="a Gaussian bias on distance", options=(WIDTH,))
    class MyBias(AttentionPosition):
        def __init__(self, embed_dim, num_heads, causal, width=1.0):
            super().__init__()
            self.width = width

        def bias(self, q, q_pos, k_pos, scale, k=None):   # q [B, H, Tq, dh]; positions [Tq], [Tk]
            d = (k_pos[None, :] - q_pos[:, None]).to(q.dtype)  # [Tq, Tk]
            return -(d / self.width) ** 2                     # broadcast to [B, H, Tq, Tk]

`--self-attn-pos my_bias --my-width 2` then works with every preset (fairseq-train and fairseq-generate given the
plugin's `--user-dir`, `fairseq-compgen eval --user-dir PLUGIN`), and `fairseq-compgen help --user-dir PLUGIN` lists
it. The
class is built with `embed_dim, num_heads, causal` and its options under their `param` names (absolute encodings:
`embed_dim, padding_idx, scaling` and `forward(positions [B, T]) -> [B, T, dim]`). Parameters of the module are
saved as `...scorer.<name>` in attention and `...embed.positions.<name>` in the embedding. An attention encoding
whose options cannot reach the model's longest position may refuse them in `check_max_positions(n)` (xPos does:
too small a scale base overflows float32). Test it against a slow
implementation of its formula and check step-by-step decoding against the full forward pass (tests/test_positions.py
does both for every encoding here).
"""
from fairseq_compgen.modules.positions.registry import (  # noqa: F401
    ATTENTION_SITES, CROSS, DECODER_SELF, ENCODER_SELF, ENCODINGS, INPUT, Option, build_attention_position,
    build_input_position, register_position)
from fairseq_compgen.modules.positions.base import AttentionPosition, relative_distances  # noqa: F401
from fairseq_compgen.modules.positions import nope  # noqa: F401,I001  (registers "none")
from fairseq_compgen.modules.positions import sinusoidal  # noqa: F401  ("sinusoidal")
from fairseq_compgen.modules.positions import learned  # noqa: F401  ("learned")
from fairseq_compgen.modules.positions import relative_txl  # noqa: F401  ("txl")
from fairseq_compgen.modules.positions import span  # noqa: F401  ("t5", "fixed_span")
from fairseq_compgen.modules.positions import relative_ontanon  # noqa: F401  ("rel-e/b/eb", "rel0-e/b/eb")
from fairseq_compgen.modules.positions import alibi  # noqa: F401  ("alibi")
from fairseq_compgen.modules.positions import rope  # noqa: F401  ("rope", "xpos")
from fairseq_compgen.modules.positions import fire  # noqa: F401  ("fire")
from fairseq_compgen.modules.positions import cope  # noqa: F401  ("cope")
from fairseq_compgen.modules.positions import randomized  # noqa: F401  (--random-positions)
# the import path of the module that held the sinusoids and the token embedding before the positions wing
from fairseq_compgen.modules.positions.sinusoidal import sinusoid, sinusoid_fairseq  # noqa: F401,I001
from fairseq_compgen.modules.embedding import EMBEDDING_SCALINGS, TokenEmbedding, positions_from_padding  # noqa: F401,E402
