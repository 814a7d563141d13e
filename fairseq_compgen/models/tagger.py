"""`compgen_tagger`: an encoder-only sequence tagger for COGS (5 tags per input token).

Ontañón, Ainslie, Cvicek & Fisher (2022), "Making Transformers Solve
Compositional Tasks", ACL, Section 4.5.1 (spec_001 §6.1): the encoder of the
seq2seq models (here :class:`CompgenEncoder` with all its options: position
encodings, sizes, weight sharing) and prediction heads on its final states:

* role, category, noun type, verb name: one linear layer each, softmax over the
  tag dictionary (as the released code; the paper's text says sigmoid);
* parent: the "attention" head of the paper: a 1-head attention whose query and
  key are linear maps of the encoder output; its weights over the (non-pad)
  source positions are the parent distribution, pointing to itself = no parent.

``forward`` returns ``{"parent": [B, S, S], "role": [B, S, V_role], ...}`` logits.
"""

import torch
from fairseq.models import BaseFairseqModel, register_model, register_model_architecture
from torch import nn

from fairseq_compgen.models.compgen_transformer import CompgenEncoder, CompgenTransformerModel, _embedding

TAG_FIELDS = ("role", "category", "noun_type", "verb_name")


@register_model("compgen_tagger")
class CompgenTaggerModel(BaseFairseqModel):
    def __init__(self, args, encoder: CompgenEncoder, n_tags):
        super().__init__()
        self.args, self.encoder = args, encoder
        dim = args.encoder_embed_dim
        self.heads = nn.ModuleDict({f: nn.Linear(dim, n) for f, n in n_tags.items()})
        self.parent_query = nn.Linear(dim, dim)
        self.parent_key = nn.Linear(dim, dim)

    @staticmethod
    def add_args(parser):
        CompgenTransformerModel.add_args(parser)  # the same encoder options (decoder options are unused)

    @classmethod
    def build_model(cls, args, task):
        from fairseq_compgen.models.archs import base_architecture

        base_architecture(args)
        src_dict = task.source_dictionary
        encoder = CompgenEncoder(args, src_dict, _embedding(args, src_dict, args.encoder_embed_dim))
        return cls(args, encoder, {f: len(task.tag_dictionaries[f]) for f in TAG_FIELDS})

    def forward(self, src_tokens, src_lengths=None, **kwargs):
        enc = self.encoder(src_tokens, src_lengths)
        x = enc["encoder_out"][0]  # [B, S, C]
        pad = enc["encoder_padding_mask"][0]  # [B, S]
        out = {f: head(x) for f, head in self.heads.items()}
        scores = torch.einsum("bic,bjc->bij", self.parent_query(x), self.parent_key(x)) / x.size(-1) ** 0.5
        out["parent"] = scores.masked_fill(pad[:, None, :], float("-inf"))  # [B, S(token), S(parent)]
        return out

    def max_positions(self):
        return self.encoder.max_positions()


@register_model_architecture("compgen_tagger", "compgen_tagger")
def compgen_tagger(args):
    from fairseq_compgen.models.archs import base_architecture

    base_architecture(args)
