"""`compgen_tagger`: an encoder-only sequence tagger for COGS (5 tags per input token).

Ontañón, Ainslie, Cvicek & Fisher (2022), "Making Transformers Solve
Compositional Tasks", ACL, Section 4.5.1: the encoder of the
seq2seq models (here :class:`CompgenEncoder` with all its options: position
encodings, sizes, weight sharing) and prediction heads on its final states:

* role, category, noun type, verb name: one linear layer each, softmax over the
  tag dictionary (as the released code; the paper's text says sigmoid);
* parent: one of the paper's three heads (`--tagger-parent-head`, modules/parent_heads.py):
  ``absolute`` (classifier over the parent index), ``relative`` (classifier over
  the offset parent - i) or ``attention`` (a 1-head attention over the tokens,
  with the encoder's relative position terms for rel-* encoders).

``forward`` returns logits ``{"parent": [B, S, K], "role": [B, S, V_role], ...}``;
``parent_head.to_classes`` / ``to_parents`` map parents (position, -1 = none) to
the K parent classes and back.
"""

from fairseq.models import BaseFairseqModel, register_model, register_model_architecture
from torch import nn

from fairseq_compgen.errors import UsageError
from fairseq_compgen.models.common import bool_flag
from fairseq_compgen.models.compgen_transformer import (CompgenEncoder, CompgenTransformerModel, build_embedding,
                                                         check_dropouts, check_sizes, check_unused_position_options)
from fairseq_compgen.modules.param_init import apply_param_init
from fairseq_compgen.modules.parent_heads import PARENT_HEADS, build_parent_head
from fairseq_compgen.modules import positions
from fairseq_compgen.modules.positions import registry as position_registry

TAG_FIELDS = ("role", "category", "noun_type", "verb_name")


@register_model("compgen_tagger")
class CompgenTaggerModel(BaseFairseqModel):
    def __init__(self, args, encoder: CompgenEncoder, n_tags):
        super().__init__()
        self.args, self.encoder = args, encoder
        dim = args.encoder_embed_dim
        self.heads = nn.ModuleDict({f: nn.Linear(dim, n) for f, n in n_tags.items()})
        pos = args.tagger_parent_pos
        if pos in (None, "inherit"):  # the encoder's scorer, for the attention head only
            pos = position_registry.site_name(args, positions.ENCODER_SELF) if args.tagger_parent_head == "attention" \
                else "none"
        scorer = positions.build_attention_position(pos, positions.ENCODER_SELF, embed_dim=dim, num_heads=1,
                                                    **position_registry.option_values(args))
        if scorer is not None and args.tagger_parent_head != "attention":
            raise UsageError(f"--tagger-parent-pos {pos} needs --tagger-parent-head attention "
                             f"(got {args.tagger_parent_head}; use --tagger-parent-pos none)")
        self.parent_head = build_parent_head(args.tagger_parent_head, dim, args.tagger_max_len or 0, scorer)

    @staticmethod
    def add_args(parser):
        CompgenTransformerModel.add_args(parser)  # the same encoder options (decoder options are unused)
        a = parser.add_argument
        a("--tagger-parent-head", choices=sorted(PARENT_HEADS),
          help="how a token names its parent (Ontañón et al. 2022 §4.5.1): absolute (classifier over the parent "
               "index), relative (classifier over parent - i) or attention (1-head attention over the tokens); "
               "default attention")
        a("--tagger-max-len", type=int, metavar="N",
          help="positions the absolute / relative parent classifiers can name (default: the longest sentence "
               "of every subset in the data folder, stored in the checkpoint)")
        a("--tagger-parent-pos", choices=["inherit"] + position_registry.names(positions.ENCODER_SELF),
          help="position scorer of the attention parent head (default inherit: the encoder's --self-attn-pos, "
               "as the authors' code gives it the relative embeddings/biases of rel-* encoders)")

    @classmethod
    def complete_args(cls, args, task):
        """What build_model fills in before building: the tagger's defaults (the Table 12 presets set only the
        encoder and the parent head) and the parent classifiers' size from the data. The resume guard compares a
        checkpoint with the command completed the same way (tasks/checkpoint_guard.py)."""
        compgen_tagger(args)
        if args.tagger_max_len is None and args.tagger_parent_head != "attention":
            args.tagger_max_len = task.max_sentence_length

    @classmethod
    def check_training_flags(cls, args) -> None:
        """What the task checks before training, and `fairseq-compgen train` before it writes anything (not when a
        checkpoint is loaded: it trained with them)."""
        check_sizes(args, "encoder")
        check_dropouts(args)
        check_unused_position_options(args, chosen=[getattr(args, "tagger_parent_pos", None)])

    @classmethod
    def ignored_flags(cls, args) -> dict:
        """The seq2seq model's decoder flags (generated from its add_args): an encoder-only tagger reads none."""
        import argparse

        parser = argparse.ArgumentParser(add_help=False)
        CompgenTransformerModel.add_args(parser)
        flags = ["--" + dest.replace("_", "-") for dest in vars(parser.parse_args([]))]  # add_args' flags by dest
        flags = [f for f in flags if any(word in f for word in ("decoder", "cross-attn", "share-all"))]
        return {f: "compgen_tagger has no decoder (it tags with the encoder alone)" for f in flags}

    @classmethod
    def build_model(cls, args, task):
        cls.complete_args(args, task)
        if bool_flag(args.encoder_bos):  # tags are read one per source position: an inserted <s> shifts them all
            raise UsageError("--encoder-bos does not apply to compgen_tagger: it tags each source token, and the "
                             "encoder's inserted <s> would put every tag one position off (leave it False)")
        src_dict = task.source_dictionary
        encoder = CompgenEncoder(args, src_dict, build_embedding(args, src_dict, args.encoder_embed_dim))
        model = cls(args, encoder, {f: len(task.tag_dictionaries[f]) for f in TAG_FIELDS})
        return apply_param_init(model, args.param_init)

    def forward(self, src_tokens, src_lengths=None, **kwargs):
        enc = self.encoder(src_tokens, src_lengths)
        x = enc["encoder_out"][0]  # [B, S, C]
        pad = enc["encoder_padding_mask"][0]  # [B, S]
        out = {f: head(x) for f, head in self.heads.items()}  # [B, S, V_f]
        out["parent"] = self.parent_head(x, pad)  # [B, S, K]
        return out

    def max_positions(self):
        return self.encoder.max_positions()


@register_model_architecture("compgen_tagger", "compgen_tagger")
def compgen_tagger(args):
    from fairseq_compgen.models.archs import base_architecture

    args.tagger_parent_head = getattr(args, "tagger_parent_head", None) or "attention"
    args.tagger_max_len = getattr(args, "tagger_max_len", None)
    args.tagger_parent_pos = getattr(args, "tagger_parent_pos", None) or "inherit"
    base_architecture(args)
