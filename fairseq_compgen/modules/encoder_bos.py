"""`--encoder-bos`: a start token before every source sentence, as Csordás et al.'s code feeds its encoder.

Csordás, Irie & Schmidhuber (2021), "The Devil is in the Detail: Simple Tricks Improve Systematic Generalization of
Transformers", EMNLP: their code (github.com/RobertCsordas/transformer_generalization; models/transformer_enc_dec.py,
with its `encoder_sos` on by default, and interfaces/transformer/encoder_decoder_interface.py, which appends the
EOS) encodes [SOS, x_1 .. x_n, EOS], where fairseq's binarized sources are [x_1 .. x_n, EOS]. With relative positions
only (Rel. Trafo, Rel. Uni. Trafo), that token is the one mark of where a sentence starts. The source dictionary's
BOS (`<s>`, which fairseq's dictionaries always hold, unused otherwise) plays it, with its own embedding row.

The encoder inserts it itself, so training, fairseq-generate and fairseq-interactive see the same input and data
folders stay as prepared: right before each sentence's first real token, whether the batch is left-padded
(fairseq's default for sources) or right-padded, so that padding never sits between the BOS and the sentence.
"""
import torch
from torch import Tensor


def prepend_bos(src_tokens: Tensor, bos: int, pad: int) -> Tensor:
    """src_tokens [B, S] (left- or right-padded with `pad`) -> [B, S + 1]: `bos` right before each row's first
    non-pad token, the padding kept on its side."""
    B, S = src_tokens.shape
    out = src_tokens.new_full((B, S + 1), pad)
    out[:, 1:] = src_tokens
    first = src_tokens.ne(pad).long().argmax(dim=1)  # [B]: each row's first real token (0 when right-padded)
    # that token is now in column first + 1 of `out`; column `first` (a pad, or the new column 0) takes the BOS
    out.scatter_(1, first.unsqueeze(1), torch.full_like(first.unsqueeze(1), bos))
    return out
