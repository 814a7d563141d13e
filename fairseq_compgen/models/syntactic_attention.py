"""Syntactic Attention (Russin, Jo, O'Reilly & Bengio 2019, arXiv:1904.09708) as a fairseq model.

The paper's Section 2 (Eqs. 1-6) and the authors' code (github.com/jlrussin/syntactic_attention). The input is
encoded twice:

* semantic stream, Eq. 1:  m_j = Dropout(W_m x_j)                       context-free, m_j in R^120
* syntactic stream, Eq. 2: e_j = Dropout(W_x x_j) (100-dim);  biLSTM_1 (100 per direction) -> f_j, b_j;
                           ctx_j = [f_{j-1} ; b_{j+1}] (zeros without a neighbour), ctx_0 and ctx_{L-1}
                           replaced by learned <SOS>/<EOS> role vectors (200-dim);  h = biLSTM_2(ctx), h_j in R^400
* s_0 = ReLU(Linear([->h_{L-1} ; <-h_0]))  (final states of biLSTM_2), the first attention query
* decoder step i, Eqs. 3-6 (one LSTM, input 400, hidden 400, (h, c) state starting at zero):
      alpha_ij = softmax_j(s_i . h_j)        plain dot product, source padding masked
      c_i = sum_j alpha_ij h_j ;  d_i = sum_j alpha_ij m_j
      logits_i = W_out d_i + b               (Linear 120 -> |V_out|; softmax in the loss / generator)
      s_{i+1}, state = LSTM(c_i, state)
  The decoder never reads its previous output token (Eq. 6): prev_output_tokens only sets how many steps to run.

Variants of Table 2 / Table 3 (off by default): --sequential-semantics (m = biLSTM(m), 60 per direction),
--syntax-action (readout Linear([d_i ; c_i])), --nonlinear-semantics (readout Linear(ReLU(Linear(ReLU(d_i))))).

Fairseq adaptation (decisions where the paper is silent or fairseq differs):

* Tokens. The authors wrap inputs as <SOS> ... <EOS>. fairseq sources end with EOS; the encoder prepends the
  dictionary's BOS, so the model sees exactly <SOS> w_1 .. w_n <EOS> and attends over all of it, as in the code.
  Targets: fairseq's prev_output_tokens start with EOS and the target ends with EOS, so step i emits y_i and
  the last step emits EOS, as in the authors' training.
* Padding (four pitfalls of the authors' batch-1 code for batch > 1): sources are moved from fairseq's left padding to right
  padding, both biLSTMs run on packed sequences, the <EOS> role goes to each row's last real position, s_0 uses
  the packed final states, and attention masks padding. Outputs of a sentence do not depend on the batch.
* Stopping. The paper's decoder runs for exactly the gold length. Ours must emit EOS to be usable with
  fairseq-generate; it is trained to (the target ends with EOS, as in the authors' code). Because the decoder
  never reads its own outputs, greedy decoding until the first EOS with exact match (the compgen task's
  `accuracy`, fairseq-compgen eval) gives the same verdict as the authors' `check_accuracy` (run the gold length
  including <EOS>, compare every token): that is the number comparable to the paper. `--eval-oracle-length`
  additionally logs `oracle_accuracy` (EOS forbidden, the gold number of tokens compared, final EOS not
  checked), a slightly more lenient score.
* Loss. fairseq's cross_entropy normalises by the number of target tokens in the batch; at --batch-size 1 this is
  the authors' per-sequence mean NLL. With larger batches it is a token-weighted mean over the batch (long
  sequences weigh more than in a mean of per-sequence means); see the recipes russin/paper and russin/batched (fairseq-compgen recipes russin/paper).
* Beam search works mechanically (the LSTM state is reorderable) but is pointless: the decoder's state does not
  depend on the chosen tokens, so greedy (--beam 1) is exact.
* Initialisation: PyTorch defaults as in the authors' code; the role vectors are N(0, 1) like nn.Embedding rows.
"""
import argparse
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq import utils
from fairseq.models import (
    FairseqEncoder,
    FairseqEncoderDecoderModel,
    FairseqIncrementalDecoder,
    register_model,
    register_model_architecture,
)
from torch import Tensor
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from fairseq_compgen.errors import UsageError
from fairseq_compgen.models.common import EncoderOut, bool_flag, reorder_encoder_out, set_default, unchanged_order

def _run_packed(lstm: nn.LSTM, x: Tensor, lengths: Tensor):
    """Bidirectional LSTM over right-padded x [B, L, C] -> (outputs [B, L, 2H] zero at pads, h_n [2, B, H])."""
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, (h_n, _) = lstm(packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
    return out, h_n


def attend(query: Tensor, keys: Tensor, values: Tensor, padding_mask: Tensor):
    """Eqs. 3-5: alpha = softmax_j(query . keys_j) over unmasked j; returns (alpha [B, S], sum_j alpha_j values_j).

    query [B, C], keys [B, S, C], values [B, S, D], padding_mask [B, S] (True = pad)."""
    scores = torch.bmm(keys, query.unsqueeze(2)).squeeze(2)  # [B, S]
    scores = scores.masked_fill(padding_mask, float("-inf"))
    alpha = torch.softmax(scores.float(), dim=-1).type_as(scores)
    return alpha, torch.bmm(alpha.unsqueeze(1), values).squeeze(1)


class SyntacticAttentionEncoder(FairseqEncoder):
    def __init__(self, args, dictionary):
        super().__init__(dictionary)
        self.args = args
        self.padding_idx, self.bos = dictionary.pad(), dictionary.bos()
        m, x = args.semantic_dim, args.syntactic_dim
        if x % 2:
            raise UsageError(f"--syntactic-dim must be even (biLSTM_1 has --syntactic-dim/2 units per direction), got {x}")
        self.dropout = nn.Dropout(args.dropout)
        self.semantic_embed = nn.Embedding(len(dictionary), m, padding_idx=self.padding_idx)  # W_m, Eq. 1
        self.sequential_semantics = bool_flag(args.sequential_semantics)
        if self.sequential_semantics:
            if m % 2:
                raise UsageError(f"--sequential-semantics needs an even --semantic-dim, got {m}")
            self.semantic_lstm = nn.LSTM(m, m // 2, batch_first=True, bidirectional=True)
        self.syntactic_embed = nn.Embedding(len(dictionary), x // 2, padding_idx=self.padding_idx)  # W_x
        self.lstm1 = nn.LSTM(x // 2, x // 2, batch_first=True, bidirectional=True)
        self.sos_role = nn.Parameter(torch.randn(x))  # learned ctx at <SOS> (authors' SOS_embed)
        self.eos_role = nn.Parameter(torch.randn(x))  # learned ctx at <EOS> (authors' EOS_embed)
        self.lstm2 = nn.LSTM(x, x, batch_first=True, bidirectional=True)  # h_j in R^{2x}
        self.init_query = nn.Linear(2 * x, 2 * x)  # s_0 = ReLU(W [->h_L ; <-h_1] + b)

    def forward(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None, **kwargs) -> EncoderOut:
        """src_tokens [B, S] (left- or right-padded, ending with EOS) -> dict, batch-first, right-padded,
        over L = S + 1 positions (<SOS> prepended):
        encoder_out [[B, L, 2x]] (syntactic h), semantic [[B, L, m]], encoder_padding_mask [[B, L]],
        init_query [[B, 2x]] (s_0), src_tokens [[B, S]] (as given)."""
        pad = src_tokens.eq(self.padding_idx)
        tokens = src_tokens
        if bool(pad[:, 0].any()):  # left-padded (fairseq's default): move pads to the right
            tokens = utils.convert_padding_direction(src_tokens, self.padding_idx, left_to_right=True)
        tokens = torch.cat([tokens.new_full((tokens.size(0), 1), self.bos), tokens], dim=1)  # [B, L]
        padding_mask = tokens.eq(self.padding_idx)  # [B, L], pads on the right
        lengths = (~padding_mask).sum(1)  # [B]
        B, L = tokens.shape
        rows = torch.arange(B, device=tokens.device)

        m = self.dropout(self.semantic_embed(tokens))  # [B, L, m]
        if self.sequential_semantics:
            m, _ = _run_packed(self.semantic_lstm, m, lengths)

        e = self.dropout(self.syntactic_embed(tokens))  # [B, L, x/2]
        h1, _ = _run_packed(self.lstm1, e, lengths)  # [B, L, x], zeros at pads
        half = h1.size(2) // 2
        fwd, bwd = h1[..., :half], h1[..., half:]
        zero = h1.new_zeros(B, 1, half)
        ctx = torch.cat([torch.cat([zero, fwd[:, :-1]], 1), torch.cat([bwd[:, 1:], zero], 1)], dim=2)  # Eq. 2
        ctx[:, 0] = self.sos_role
        ctx[rows, lengths - 1] = self.eos_role.to(ctx.dtype)
        ctx = ctx.masked_fill(padding_mask.unsqueeze(2), 0.0)
        h, h_n = _run_packed(self.lstm2, ctx, lengths)  # [B, L, 2x]; h_n [2, B, x]
        s0 = F.relu(self.init_query(torch.cat([h_n[0], h_n[1]], dim=1)))  # [B, 2x]
        return {
            "encoder_out": [h],
            "semantic": [m],
            "encoder_padding_mask": [padding_mask],
            "init_query": [s0],
            "src_tokens": [src_tokens],
        }

    def reorder_encoder_out(self, encoder_out: EncoderOut, new_order: Tensor) -> EncoderOut:
        return reorder_encoder_out(encoder_out, new_order)

    def max_positions(self):
        return self.args.max_source_positions


class SyntacticAttentionDecoder(FairseqIncrementalDecoder):
    def __init__(self, args, dictionary):
        super().__init__(dictionary)
        self.args = args
        m, hdim = args.semantic_dim, 2 * args.syntactic_dim
        self.cell = nn.LSTMCell(hdim, hdim)  # g in Eq. 6: input c_i, hidden 400
        self.syntax_action = bool_flag(args.syntax_action)
        self.nonlinear_semantics = bool_flag(args.nonlinear_semantics)
        if self.syntax_action and self.nonlinear_semantics:
            raise UsageError("--syntax-action and --nonlinear-semantics are separate variants of the paper; pick one")
        feat = m + hdim if self.syntax_action else m
        self.semantic_mlp = nn.Linear(m, m) if self.nonlinear_semantics else None
        self.out = nn.Linear(feat, len(dictionary))  # f in Eq. 3

    def forward(self, prev_output_tokens, encoder_out: Optional[EncoderOut] = None, incremental_state=None,
                features_only: bool = False, **kwargs):
        x, extra = self.extract_features(prev_output_tokens, encoder_out, incremental_state)
        if not features_only:
            x = self.output_layer(x)
        return x, extra

    def extract_features(self, prev_output_tokens, encoder_out: Optional[EncoderOut] = None, incremental_state=None,
                         **kwargs):
        """prev_output_tokens [B, T] (only its length is used, Eq. 6) -> features [B, T, m] (d_i, or [d_i ; c_i]
        with --syntax-action); one step (the last) when decoding incrementally."""
        h = encoder_out["encoder_out"][0]  # [B, L, 2x]
        m = encoder_out["semantic"][0]  # [B, L, m]
        mask = encoder_out["encoder_padding_mask"][0]  # [B, L]
        state = None
        if incremental_state is not None:
            state = self.get_incremental_state(incremental_state, "lstm_state")
            steps = 1
        else:
            steps = prev_output_tokens.size(1)
        if state is None:
            query = encoder_out["init_query"][0]  # s_0
            hc = (query.new_zeros(query.shape), query.new_zeros(query.shape))  # LSTM state starts at zero
        else:
            query, hc = state["query"], (state["h"], state["c"])
        feats, alphas = [], []
        for _ in range(steps):
            alpha, d = attend(query, h, m, mask)  # Eqs. 3-5: d_i
            c = torch.bmm(alpha.unsqueeze(1), h).squeeze(1)  # Eq. 6: c_i
            feats.append(torch.cat([d, c], dim=1) if self.syntax_action else d)
            alphas.append(alpha)
            hc = self.cell(c, hc)
            query = hc[0]  # s_{i+1}
        if incremental_state is not None:
            self.set_incremental_state(incremental_state, "lstm_state", {"query": query, "h": hc[0], "c": hc[1]})
        # "attn" stays None: alpha is over the encoder's right-padded <SOS>-prefixed layout, not src_tokens'
        return torch.stack(feats, dim=1), {"attn": [None], "syntactic_attn": [torch.stack(alphas, dim=1)]}

    def output_layer(self, features: Tensor) -> Tensor:
        if self.semantic_mlp is not None:  # Table 3 "nonlinear semantics"
            features = F.relu(self.semantic_mlp(F.relu(features)))
        return self.out(features)  # [B, T, V]

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        state = self.get_incremental_state(incremental_state, "lstm_state")
        if state is not None and not unchanged_order(new_order, state.values()):  # greedy: mostly the identity
            state = {k: v.index_select(0, new_order) for k, v in state.items()}
            self.set_incremental_state(incremental_state, "lstm_state", state)

    def max_positions(self):
        return self.args.max_target_positions


@register_model("syntactic_attention")
class SyntacticAttentionModel(FairseqEncoderDecoderModel):
    """Syntactic Attention (Russin et al. 2019); see the module docstring and the recipes russin/*."""

    @staticmethod
    def add_args(parser: argparse.ArgumentParser):
        a = parser.add_argument
        a("--semantic-dim", type=int, metavar="N",
          help="size of the context-free semantic embeddings m_j (Russin et al. 2019 Eq. 1; paper: 120)")
        a("--syntactic-dim", type=int, metavar="N",
          help="syntactic stream width x (Russin et al. 2019 §3, authors' x_hidden_dim; paper: 200): embedding "
               "x/2, first biLSTM x/2 per direction, second biLSTM x per direction, so h_j and the decoder LSTM "
               "have 2x = 400 units")
        a("--dropout", type=float, metavar="D",
          help="dropout on the semantic and syntactic input embeddings (Russin et al. 2019 supplement: 0.5)")
        a("--sequential-semantics", type=bool_flag, metavar="BOOL",
          help="Table 2 'Sequential semantics': m = biLSTM(m) (semantic-dim/2 per direction)")
        a("--syntax-action", type=bool_flag, metavar="BOOL",
          help="Table 2 'Syntax-action': read out from [d_i ; c_i] instead of d_i")
        a("--nonlinear-semantics", type=bool_flag, metavar="BOOL",
          help="Table 3 'Nonlinear semantics': read out with Linear(ReLU(Linear(ReLU(d_i)))) (two layers)")
        a("--max-source-positions", type=int, metavar="N", help="longest source accepted")
        a("--max-target-positions", type=int, metavar="N", help="longest target accepted")

    @classmethod
    def build_model(cls, args, task):
        base_architecture(args)
        return cls(SyntacticAttentionEncoder(args, task.source_dictionary),
                   SyntacticAttentionDecoder(args, task.target_dictionary))

    def max_positions(self):
        return (self.encoder.max_positions(), self.decoder.max_positions())


@register_model_architecture("syntactic_attention", "syntactic_attention")
def base_architecture(args):
    """The paper's model (Section 3.2 and the authors' code): m 120, x 200 (h and decoder 400), dropout 0.5, no variant."""
    for name, value in dict(
        semantic_dim=120, syntactic_dim=200, dropout=0.5, sequential_semantics=False, syntax_action=False,
        nonlinear_semantics=False, max_source_positions=1024, max_target_positions=1024,
    ).items():
        set_default(args, name, value)


@register_model_architecture("syntactic_attention", "syntactic_attention_scan")
def syntactic_attention_scan(args):
    """SCAN (all splits of the paper): the paper's sizes. Training flags: the recipes russin/*."""
    base_architecture(args)
