"""NoPE: no position signal at all (Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length
Generalization in Transformers").

The entry `none` of every site. In the causal decoder the mask alone carries order (a token sees how many tokens
precede it through the attention's normalisation). In the bidirectional encoder nothing does: with
`--absolute-positions none --self-attn-pos none` the encoder sees a bag of tokens, which is what NoPE means there.
"""
from fairseq_compgen.modules.positions.registry import ATTENTION_SITES, INPUT, register_position

register_position("none", sites=(INPUT, *ATTENTION_SITES), paper="NoPE: Kazemnejad et al. 2023",
                  help="no position signal (in the decoder the causal mask carries order; the encoder sees a bag "
                       "of tokens)")(None)
