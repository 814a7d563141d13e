"""One encoder-decoder Transformer whose inductive biases are independent options.

Each option is one mechanism from one paper; the named architectures in `archs.py` are presets over them.
Options of this module (see `--help` for all flags):

* position encodings of the input, self- and cross-attention (`--absolute-positions`, `--self-attn-pos`,
  `--cross-attn-pos`): every encoding of the registry in modules/positions/ (`fairseq-compgen help` lists them
  with their papers), e.g. txl (Csordás et al. 2021 §3.1), t5 / fixed_span (Chaabouni et al. 2021 §3, Eq. 3)
* embedding scaling teu / none / ped                                       (Csordás et al. 2021, §3.3)
* self-attention replaced by a convolution (`--self-attn-type conv`)       (Chaabouni et al. 2021, §3)
* self-attention gate (`--encoder-sag-init`, `--decoder-sag-init`)        (Chaabouni et al. 2021, Alg. 1)
* linear attention everywhere, Q/K normalization (`--self-attn-type linear`, `--qk-norm`) (Park & Kim 2024, §4.1)
* relative labels rel-e/-b/-eb (`--self-attn-pos`, `--cross-attn-pos`), copy decoder (Ontañón et al. 2022 §4.1-4.2)
* Universal layer sharing (`--universal`)                                  (Csordás et al. 2021, §2.2)
* post-LN (the authors' code) or pre-LN (`--normalize-before`)
* tied output embedding with a learned output bias                        (Csordás et al. 2021, App. B)
* a start token before every source (`--encoder-bos`)                     (Csordás et al. 2021, their code)

Tensors are batch-first inside the model: [B, T, C].
"""
import argparse
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, FairseqIncrementalDecoder, register_model
from torch import Tensor

from fairseq_compgen.errors import UsageError
from fairseq_compgen.models.common import EncoderOut, bool_flag, reorder_encoder_out, unchanged_order
from fairseq_compgen.modules.attention import MultiheadAttention
from fairseq_compgen.modules.conv_self_attention import ConvSelfAttention
from fairseq_compgen.modules.copy_decoder import CopyDistribution
from fairseq_compgen.modules.layer_stack import LayerStack
from fairseq_compgen.modules.layers import DecoderLayer, EncoderLayer
from fairseq_compgen.modules.linear_attention import QK_NORMS, LinearAttention
from fairseq_compgen.modules.param_init import PARAM_INITS, apply_param_init
from fairseq_compgen.modules import positions
from fairseq_compgen.modules.embedding import EMBEDDING_SCALINGS, TokenEmbedding
from fairseq_compgen.modules.encoder_bos import prepend_bos
from fairseq_compgen.modules.positions import randomized
from fairseq_compgen.modules.positions import registry as position_registry
from fairseq_compgen.modules.self_attention_gate import build_gate

def build_embedding(args, dictionary, dim: int) -> TokenEmbedding:
    """The token embedding with the absolute positions of `--absolute-positions` (registry site INPUT)."""
    name = position_registry.site_name(args, positions.INPUT)
    absolute = name != "none"
    dropout = args.embedding_dropout if args.embedding_dropout is not None else (args.dropout if absolute else 0.0)
    # without absolute positions only `keras` and `fairseq` scale (their frameworks' sqrt(d)); the others are
    # "+ P" schemes
    scaling = args.embedding_scaling if absolute or args.embedding_scaling in ("keras", "fairseq") else None
    return TokenEmbedding(len(dictionary), dim, dictionary.pad(), scaling, dropout, positions=name,
                          position_options=position_registry.option_values(args))


def build_attention_position(args, site: str, dim: int, heads: int) -> Optional[nn.Module]:
    """The position encoding the flags choose for attention `site` (modules/positions/registry.py), or None."""
    longest = max(args.max_source_positions + 1, args.max_target_positions + 1, random_positions(args))  # +1: BOS
    return positions.build_attention_position(position_registry.site_name(args, site), site, embed_dim=dim,
                                              num_heads=heads, max_positions=longest,
                                              **position_registry.option_values(args))


DROPOUTS = ("dropout", "attention_dropout", "activation_dropout", "embedding_dropout")


def check_dropouts(args) -> None:
    """Every dropout is a probability (--attention-dropout 1.5 or nan trained without a word)."""
    for dest in DROPOUTS:
        p = getattr(args, dest, None)
        if p is not None and not (isinstance(p, (int, float)) and 0 <= p < 1):  # nan fails both comparisons
            raise UsageError(f"--{dest.replace('_', '-')} {p}: expected a probability, 0 <= p < 1")


def check_unused_position_options(args, chosen=()) -> None:
    """A position option set away from its default that no chosen encoding takes changes nothing: refused, so
    that `--rope-theta 500` without rope is not mistaken for a rope run. `chosen`: encodings built besides the
    sites' (a tagger's parent head); conv self-attention reads --rel-span itself. Checked when training only: a
    checkpoint trained before the check still loads."""
    taken = ("rel_span",) if args.self_attn_type == "conv" else ()
    for o in position_registry.unused_options(args, chosen, taken):
        users = ", ".join(n for n, e in position_registry.ENCODINGS.items() if o in e.options)
        raise UsageError(f"{o.flag} {getattr(args, o.dest)} changes nothing: it is an option of {users} only, "
                         f"which no position flag here chooses (--absolute-positions, --self-attn-pos, "
                         f"--cross-attn-pos)")


def random_positions(args) -> int:
    """--random-positions N (Ruoss et al. 2023), checked against the encodings that would take the positions."""
    n = getattr(args, "random_positions", 0) or 0
    sites = (positions.INPUT, positions.ENCODER_SELF, positions.DECODER_SELF)
    if n and args.self_attn_type != "attention":
        raise UsageError(f"--random-positions needs softmax self-attention, not --self-attn-type {args.self_attn_type}")
    return randomized.check(n, [position_registry.site_name(args, s) for s in sites])


def _sampled_positions(module, length: int, device) -> Optional[Tensor]:
    """Randomized positions of a stack for this batch (training only), or None (0..length-1)."""
    if not (module.training and module.random_positions):
        return None
    return randomized.sample_positions(length, module.random_positions, device=device)  # [length]


def _self_attention(args, dim: int, heads: int, causal: bool) -> nn.Module:
    site = positions.DECODER_SELF if causal else positions.ENCODER_SELF
    pos = position_registry.site_name(args, site)
    if getattr(args, "qk_norm", "none") not in (None, "none") and args.self_attn_type != "linear":
        raise UsageError(f"--qk-norm {args.qk_norm} needs --self-attn-type linear")
    if args.self_attn_type == "linear":  # Park & Kim (2024); cross-attention is linear too (CompgenDecoder)
        if pos != "none":
            raise UsageError(f"--self-attn-type linear takes no self-attention position encoding (got {pos!r})")
        return LinearAttention(dim, heads, args.qk_norm, bias=bool_flag(args.attention_bias))
    if args.self_attn_type == "conv":
        if pos != "none":
            raise UsageError(f"--self-attn-type conv replaces self-attention: it takes no --self-attn-pos "
                             f"(got {pos!r})")
        return ConvSelfAttention(dim, heads, args.rel_span, causal, args.attention_dropout, bool_flag(args.attention_bias))
    if args.self_attn_type != "attention":
        raise UsageError(f"--self-attn-type must be attention, conv or linear, got {args.self_attn_type!r}")
    return MultiheadAttention(dim, heads, args.attention_dropout, bias=bool_flag(args.attention_bias),
                              scorer=build_attention_position(args, site, dim, heads))


def check_sizes(args, side: str) -> None:
    """The sizes of one stack (`side`: encoder or decoder) are positive integers (0 gave a ZeroDivisionError)."""
    for name in ("embed_dim", "ffn_embed_dim", "attention_heads", "layers"):
        value = getattr(args, f"{side}_{name}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"--{side}-{name.replace('_', '-')} {value}: expected a positive whole number")


class CompgenEncoder(FairseqEncoder):
    def __init__(self, args, dictionary, embed: TokenEmbedding):
        super().__init__(dictionary)
        self.args, self.embed = args, embed
        self.padding_idx = dictionary.pad()
        dim = args.encoder_embed_dim

        def make_layer():
            attn = _self_attention(args, dim, args.encoder_attention_heads, causal=False)
            return EncoderLayer(dim, args.encoder_ffn_embed_dim, attn, args.dropout, args.activation_dropout,
                                bool_flag(args.normalize_before), gate=build_gate(args.encoder_sag_init))

        self.stack = LayerStack(make_layer, args.encoder_layers, bool_flag(args.universal))
        self.final_norm = nn.LayerNorm(dim) if bool_flag(args.normalize_before) else None
        self.random_positions = random_positions(args)

    def forward(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None, **kwargs) -> EncoderOut:
        """src_tokens [B, S] (left- or right-padded) -> {"encoder_out": [[B, S, C]], "encoder_padding_mask": [[B, S]], ...}"""
        if bool_flag(self.args.encoder_bos):  # [B, S + 1]: Csordás et al.'s [SOS, x, EOS] (modules/encoder_bos.py)
            src_tokens = prepend_bos(src_tokens, self.dictionary.bos(), self.padding_idx)
        padding_mask = src_tokens.eq(self.padding_idx)  # [B, S]
        pos = _sampled_positions(self, src_tokens.size(1), src_tokens.device)  # [S] or None
        x = self.embed(src_tokens, positions=pos)  # [B, S, C]
        for depth, layer in self.stack:
            x = layer(x, padding_mask, depth, positions=pos)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return {"encoder_out": [x], "encoder_padding_mask": [padding_mask], "src_tokens": [src_tokens]}

    def reorder_encoder_out(self, encoder_out: EncoderOut, new_order: Tensor) -> EncoderOut:
        return reorder_encoder_out(encoder_out, new_order)

    def max_positions(self):  # the longest source fairseq lets in: one position less when the encoder adds a BOS
        return self.args.max_source_positions - int(bool_flag(self.args.encoder_bos))


class CompgenDecoder(FairseqIncrementalDecoder):
    def __init__(self, args, dictionary, embed: TokenEmbedding):
        super().__init__(dictionary)
        self.args, self.embed = args, embed
        dim = args.decoder_embed_dim

        def make_layer():
            self_attn = _self_attention(args, dim, args.decoder_attention_heads, causal=True)
            cross = MultiheadAttention(dim, args.decoder_attention_heads, args.attention_dropout,
                                       bias=bool_flag(args.attention_bias), kv_dim=args.encoder_embed_dim,
                                       scorer=build_attention_position(args, positions.CROSS, dim,
                                                                       args.decoder_attention_heads),
                                       key_positions_from_padding=True)
            if args.self_attn_type == "linear":  # a Linear Transformer: cross-attention is linear as well
                if position_registry.site_name(args, positions.CROSS) != "none":
                    raise UsageError(f"--cross-attn-pos {args.cross_attn_pos} has no effect with --self-attn-type "
                                     f"linear (cross-attention is linear and takes no position scorer)")
                cross = LinearAttention(dim, args.decoder_attention_heads, args.qk_norm,
                                        bias=bool_flag(args.attention_bias), kv_dim=args.encoder_embed_dim)
            return DecoderLayer(dim, args.decoder_ffn_embed_dim, self_attn, cross, args.dropout,
                                args.activation_dropout, bool_flag(args.normalize_before),
                                gate=build_gate(args.decoder_sag_init))

        self.stack = LayerStack(make_layer, args.decoder_layers, bool_flag(args.universal))
        self.final_norm = nn.LayerNorm(dim) if bool_flag(args.normalize_before) else None
        if bool_flag(args.share_decoder_input_output_embed):
            self.output_weight = None  # logits = h E^T + b with E the decoder's input embedding
        else:
            self.output_weight = nn.Parameter(torch.empty(len(dictionary), dim))
            nn.init.xavier_uniform_(self.output_weight)
        self.output_bias = nn.Parameter(torch.zeros(len(dictionary)))
        # Ontañón et al. (2022) §4.2: the output is log((1-w) p_vocab + w p_copy), see modules/copy_decoder.py
        self.copy = CopyDistribution(dim) if bool_flag(getattr(args, "copy_decoder", False)) else None
        self.random_positions = random_positions(args)

    def forward(self, prev_output_tokens, encoder_out: Optional[EncoderOut] = None, incremental_state=None,
                features_only: bool = False, **kwargs):
        x, extra = self.extract_features(prev_output_tokens, encoder_out, incremental_state)
        if not features_only:
            logits = self.output_layer(x)
            if self.copy is not None:  # normalized log-probabilities, not logits
                src = encoder_out["src_tokens"][0]  # [B, S]
                # the copy reads source words only: not padding, nor the <s> of --encoder-bos (modules/encoder_bos.py)
                not_words = encoder_out["encoder_padding_mask"][0] | src.eq(self.dictionary.bos())  # [B, S]
                logits = self.copy(x, logits, encoder_out["encoder_out"][0], not_words, src)
            x = logits
        return x, extra

    def reorder_incremental_state_scripting(self, incremental_state, new_order: Tensor):
        """fairseq's reorder of every module's decoding cache (beam search), skipped where it would change nothing:
        greedy decoding's steps where no sentence finished (models/common.py:unchanged_order)."""
        if unchanged_order(new_order, (t for buf in incremental_state.values() for t in buf.values())):
            return
        super().reorder_incremental_state_scripting(incremental_state, new_order)

    def get_normalized_probs(self, net_output, log_probs: bool, sample=None):
        if self.copy is None:
            return super().get_normalized_probs(net_output, log_probs, sample)
        lprobs = net_output[0].float()  # already log p (copy decoder)
        return lprobs if log_probs else lprobs.exp()

    def extract_features(self, prev_output_tokens, encoder_out: Optional[EncoderOut] = None, incremental_state=None,
                         **kwargs):
        """prev_output_tokens [B, T] -> features [B, T, C] (only the last step's when decoding incrementally)."""
        start = 0
        if incremental_state is not None:
            start = prev_output_tokens.size(1) - 1
            prev_output_tokens = prev_output_tokens[:, -1:]  # [B, 1]
        pos = None if incremental_state is not None else \
            _sampled_positions(self, prev_output_tokens.size(1), prev_output_tokens.device)  # [T] or None
        x = self.embed(prev_output_tokens, start=start, positions=pos)  # [B, T, C]
        enc = encoder_out["encoder_out"][0]  # [B, S, C]
        enc_pad = encoder_out["encoder_padding_mask"][0]  # [B, S]
        memo = self.stack.depth_memo()  # a shared layer's cross-attention projects `enc` once, not at every depth
        for depth, layer in self.stack:
            x = layer(x, enc, enc_pad, incremental_state, depth, positions=pos, memo=memo)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, {"attn": [None], "inner_states": [x]}

    def output_layer(self, features: Tensor) -> Tensor:
        weight = self.embed.weight if self.output_weight is None else self.output_weight
        return F.linear(features, weight, self.output_bias)  # [B, T, V]

    def max_positions(self):
        return self.args.max_target_positions


@register_model("compgen_transformer")
class CompgenTransformerModel(FairseqEncoderDecoderModel):
    """The composable Transformer of fairseq_compgen; pick a preset with --arch (docs/models.md; `fairseq-compgen help`)."""

    @staticmethod
    def add_args(parser: argparse.ArgumentParser):
        a = parser.add_argument
        for side in ("encoder", "decoder"):
            a(f"--{side}-embed-dim", type=int, metavar="N", help=f"{side} model dimension d_model")
            a(f"--{side}-ffn-embed-dim", type=int, metavar="N", help=f"{side} feed-forward inner dimension d_FF")
            a(f"--{side}-attention-heads", type=int, metavar="N", help=f"{side} attention heads")
            a(f"--{side}-layers", type=int, metavar="N",
              help=f"{side} layers (with --universal: how many times the one shared layer is applied)")
        a("--dropout", type=float, metavar="D", help="dropout after every sublayer (attention, feed-forward)")
        a("--attention-dropout", type=float, metavar="D", help="dropout on attention probabilities")
        a("--activation-dropout", type=float, metavar="D", help="dropout inside the feed-forward block")
        a("--embedding-dropout", type=float, metavar="D",
          help="dropout on the input embeddings (default: --dropout with absolute positions, 0 without, as Csordás et al.)")
        position_registry.add_args(a)  # --absolute-positions, --self-attn-pos, ..., and every encoding's options
        a("--embedding-scaling", choices=list(EMBEDDING_SCALINGS),
          help="with absolute positions: teu = sqrt(d)*E + P (Xavier init); none = E + P (N(0,1) init); "
               "ped = E + P/sqrt(d) (Kaiming init). Csordás et al. 2021 §3.3. Without absolute positions "
               "the embedding is Xavier-initialised and unscaled, except keras = sqrt(d)*E (+ P), E ~ U[-0.05, "
               "0.05]: the TF Transformer tutorial's, with or without positions (Ontañón et al. 2022 App. A), and "
               "fairseq = sqrt(d)*E (+ fairseq's sinusoids, positions from padding_idx + 1), E ~ N(0, d^-1/2): "
               "fairseq's transformer (Chaabouni et al. 2021 §3)")
        a("--param-init", choices=list(PARAM_INITS),
          help="initialisation of the dense layers after the model is built (modules/param_init.py): default = "
               "each module's own (Xavier-uniform, as Csordás et al.'s code); keras = Glorot-uniform with zero "
               "biases for every linear layer and LayerNorm eps 1e-6 (Ontañón et al. 2022 App. A); fairseq = "
               "fairseq's transformer (attention Q/K/V Xavier gain 1/sqrt(2), PyTorch-default feed-forward, "
               "N(0, d^-1/2) output projection; Chaabouni et al. 2021 §3)")
        a("--self-attn-type", choices=["attention", "conv", "linear"],
          help="attention: multi-head self-attention; conv: self-attention replaced by a lightweight convolution "
               "over the value projection, one softmax-normalised kernel per head over the span "
               "(Chaabouni et al. 2021 §3 'Convolution as self-attention'; see modules/conv_self_attention.py); "
               "linear: every attention (encoder, causal decoder, cross) is linear attention with "
               "phi(x) = elu(x) + 1 (Katharopoulos et al. 2020; Park & Kim 2024; see modules/linear_attention.py)")
        a("--qk-norm", choices=list(QK_NORMS),
          help="with --self-attn-type linear: normalization of each head's phi(Q), phi(K) vectors (Park & Kim 2024 "
               "§4.1): none (vanilla Linear Transformer), l1 = x/(|x|_1+eps), l2 = x/(|x|_2+eps), "
               "rms = x/(RMS[x]+eps)*gamma with one trainable gamma for Q and one for K, shared by all heads")
        for side in ("encoder", "decoder"):
            a(f"--{side}-sag-init", type=float, metavar="BETA0",
              help=f"self-attention gate in every {side} layer: the self-attention output is multiplied by "
                   f"sigmoid(beta), beta a learned scalar per layer initialised to BETA0 (Chaabouni et al. 2021, "
                   f"Algorithm 1); absent: no gate")
        a("--universal", type=bool_flag, metavar="BOOL",
          help="Universal Transformer: one encoder layer and one decoder layer applied --*-layers times")
        a("--normalize-before", type=bool_flag, metavar="BOOL", help="pre-LN layers (default: post-LN)")
        a("--attention-bias", type=bool_flag, metavar="BOOL", help="biases in the Q/K/V/O projections (Csordás: no)")
        a("--share-decoder-input-output-embed", type=bool_flag, metavar="BOOL",
          help="tie the output projection to the decoder input embedding (plus a learned output bias)")
        a("--share-all-embeddings", type=bool_flag, metavar="BOOL",
          help="one embedding for encoder input, decoder input and output (needs a joined dictionary)")
        a("--copy-decoder", type=bool_flag, metavar="BOOL",
          help="copy decoder (Ontañón et al. 2022 §4.2): mix the vocabulary softmax with a copy distribution from "
               "single-head attention over the encoder output, through a sigmoid gate; needs a joined dictionary")
        a("--encoder-bos", type=bool_flag, metavar="BOOL",
          help="the encoder reads [BOS, source, EOS] instead of fairseq's [source, EOS]: the source dictionary's "
               "<s> before every sentence, inserted by the encoder (Csordás et al.'s code; modules/encoder_bos.py)")
        a("--max-source-positions", type=int, metavar="N", help="longest source accepted")
        a("--max-target-positions", type=int, metavar="N", help="longest target accepted")

    @classmethod
    def check_training_flags(cls, args) -> None:
        """What the task checks before training, and `fairseq-compgen train` before it writes anything (not when a
        checkpoint is loaded: it trained with them)."""
        check_sizes(args, "encoder")
        check_sizes(args, "decoder")
        check_dropouts(args)
        check_unused_position_options(args)
        if bool_flag(args.share_all_embeddings) and not bool_flag(args.share_decoder_input_output_embed):
            raise UsageError("--share-all-embeddings True shares the decoder's input and output embeddings too: "
                             "expected no --share-decoder-input-output-embed False with it")

    @classmethod
    def ignored_flags(cls, args) -> dict:
        """Flags whose value these settings never read (flag -> why): refused where given on the command line
        (pipelines/train.py), since their defaults are set for every preset."""
        if args.self_attn_type == "linear":
            return {"--attention-dropout": "linear attention (self and cross) forms no attention weights to drop"}
        return {}

    @classmethod
    def build_model(cls, args, task):
        from fairseq_compgen.models.archs import base_architecture

        base_architecture(args)
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        if bool_flag(getattr(args, "copy_decoder", False)) and src_dict != tgt_dict:
            raise UsageError("--copy-decoder needs a joined dictionary (fairseq-preprocess --joined-dictionary)")
        if bool_flag(args.share_all_embeddings):
            if src_dict != tgt_dict:
                raise UsageError("--share-all-embeddings needs a joined dictionary (fairseq-preprocess --joined-dictionary)")
            if args.encoder_embed_dim != args.decoder_embed_dim:
                raise UsageError("--share-all-embeddings needs --encoder-embed-dim == --decoder-embed-dim")
            enc_embed = dec_embed = build_embedding(args, src_dict, args.encoder_embed_dim)
            args.share_decoder_input_output_embed = True
        else:
            enc_embed = build_embedding(args, src_dict, args.encoder_embed_dim)
            dec_embed = build_embedding(args, tgt_dict, args.decoder_embed_dim)
        encoder = CompgenEncoder(args, src_dict, enc_embed)
        decoder = CompgenDecoder(args, tgt_dict, dec_embed)
        return apply_param_init(cls(encoder, decoder), args.param_init)

    def max_positions(self):
        return (self.encoder.max_positions(), self.decoder.max_positions())
