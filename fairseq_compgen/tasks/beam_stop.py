"""`--beam-stop bound`: beam search that ends a sentence only when no hypothesis left in the beam can still beat the
best ended ones.

fairseq's SequenceGenerator ends a sentence as soon as `--beam` hypotheses have ended (its `is_finished`), whatever
their scores, and keeps none that ends later. A model that is nearly certain of each next token still gives
end-of-sequence some probability, so its junk alternatives end early and fill the places before its own output
ends: on SCAN length, Rel. Uni. after 50,000 updates decoded gen with exact match 0.976 greedily and 0.037 with
`--beam 4` (results/beam_search_scan26/). fairseq has no flag to change this (`--no-early-stop` is deprecated and
does nothing).

This is the textbook beam search (e.g. Koehn, "Statistical Machine Translation", 2010, ch. 6; for the stopping
rule, Huang, Zhao & Ma, "When to Finish? Optimal Beam Search for Neural Text Generation", EMNLP 2017): at every
step each live hypothesis of a sentence is extended by every token; the ones extended by EOS join that sentence's
ended hypotheses, the best `--beam` of the others stay live. A sentence is done when its `--nbest`-th best ended
hypothesis scores at least the best score any live one could still reach:

* without length normalization (`--unnormalized`, or `--lenpen 0`) a score is a sum of log-probabilities, which
  never grows, so a live hypothesis can reach at most its score now;
* with fairseq's normalization, score = sum of log-probabilities / length ** lenpen (length with EOS), a live
  hypothesis of raw score s <= 0 can reach at most s / L ** lenpen at the most favourable length L it can still end
  at (the longest, max_len + 1, for lenpen >= 0; the shortest, for lenpen < 0). That bound is loose, so with
  normalization most sentences decode to max_len: exact, and slower (fairseq-compgen eval gives a beam fairseq's
  --max-len-b 200 or the user's, never a limit read from the references: pipelines/evaluate.py, length_limit).

Scores, min/max length, --unkpen, --temperature and --lenpen mean what they mean to SequenceGenerator, and the
hypotheses come in its format. What it returns is, per sentence, the best hypotheses a beam of that width holds (its
best ended one scores at least fairseq's, which ends a subset of the same beams earlier): beam search still prunes,
so it is not the model's best output over all sequences unless the beam holds every prefix (tests/test_beam_stop.py
checks that case against an enumeration of all outputs).

Options of fairseq's other searches (sampling, diverse beams, prefixes, constraints, a language model, n-gram
blocking, --match-source-len) are refused in one line (`check`).
"""
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.sequence_generator import SequenceGenerator
from torch import Tensor

from fairseq_compgen.errors import UsageError

BEAM_STOPS = ChoiceEnum(["fairseq", "bound"])


@dataclass
class BeamStopConfig(FairseqDataclass):
    """The flag, of the task that generates (compgen); fairseq-generate and fairseq-compgen eval read it."""
    beam_stop: BEAM_STOPS = field(default="fairseq", metadata={
        "help": "when beam search ends a sentence: 'fairseq' (fairseq's SequenceGenerator: as soon as --beam hypotheses "
                "have ended, whatever their scores) or 'bound' (only when no hypothesis left in the beam can still "
                "score above the --nbest best ended ones; tasks/beam_stop.py). With exact match on SCAN-like data "
                "fairseq's rule lets junk that ends early crowd out the model's own output"})


# generation options of fairseq's other searches, each with when fairseq turns it on (its build_generator, generate.py)
_OTHER_SEARCHES = {"sampling": bool, "diverse_beam_groups": lambda v: v > 0, "diversity_rate": lambda v: v > -1,
                   "match_source_len": bool, "constraints": bool, "prefix_size": lambda v: v > 0,
                   "lm_path": bool, "no_repeat_ngram_size": lambda v: v > 0}


def check(args) -> None:
    """One line for a generation option that --beam-stop bound does not implement, or a value it cannot search
    with (args: fairseq's generation config)."""
    beam = getattr(args, "beam", 1)
    if beam < 1:  # a traceback in the first step before (an audit, 2026-11-29)
        raise UsageError(f"--beam {beam}: expected a positive width with --beam-stop bound (1: greedy)")
    for flag, value in (("--lenpen", getattr(args, "lenpen", 1.0)), ("--unkpen", getattr(args, "unkpen", 0.0))):
        if not math.isfinite(value):  # nan scored every hypothesis nan, and the empty output won
            raise UsageError(f"{flag} {value}: expected a finite number with --beam-stop bound")
    for name, on in _OTHER_SEARCHES.items():
        value = getattr(args, name, None)
        if value is not None and on(value):
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} {value}: --beam-stop bound is plain beam search and does not implement it; "
                             f"leave out {flag}, or use --beam-stop fairseq")


class BoundedBeamSearch(SequenceGenerator):
    """SequenceGenerator's model handling and options, with the search of the module docstring (its `_generate`).

    `nbest`: how many of a sentence's ended hypotheses must be final before it is done (fairseq-generate's --nbest).
    Unlike SequenceGenerator, the beam may be wider than the vocabulary."""

    def __init__(self, models, tgt_dict, beam_size: int = 1, nbest: int = 1, **kwargs):
        super().__init__(models, tgt_dict, beam_size=beam_size, **kwargs)
        self.beam_size = beam_size  # SequenceGenerator caps it at the vocabulary size, which its search needs
        self.model.set_decoder_beam_size(beam_size)
        self.nbest = nbest
        if self.lm_model is not None or self.repeat_ngram_blocker is not None or self.match_source_len:
            raise UsageError("--beam-stop bound: no language model, --no-repeat-ngram-size or --match-source-len")

    def _bound(self, live: Tensor, step: int, max_len: int) -> Tensor:
        """[bsz, K]: the best score each live hypothesis (summed log-prob `live`, after choosing token step + 1)
        could still end with; -inf where it is dead."""
        if self.unk_penalty < 0:  # a negative --unkpen adds to a log-probability: no bound holds, decode to max_len
            return torch.where(live.isfinite(), math.inf, -math.inf)
        if not self.normalize_scores or self.len_penalty == 0:
            return live
        length = max_len + 1 if self.len_penalty > 0 else min(step + 2, max_len + 1)  # the most favourable, with EOS
        return live / length ** self.len_penalty

    @torch.no_grad()
    def _generate(self, sample: Dict[str, Dict[str, Tensor]], prefix_tokens: Optional[Tensor] = None,
                  constraints: Optional[Tensor] = None, bos_token: Optional[int] = None):
        if prefix_tokens is not None or constraints is not None:
            raise UsageError("--beam-stop bound does not implement --prefix-size or --constraints")
        net_input = sample["net_input"]
        src_tokens = net_input["src_tokens"]
        bsz, src_len = src_tokens.shape[:2]
        K, V = self.beam_size, self.vocab_size
        max_len = min(int(self.max_len_a * src_len + self.max_len_b), self.max_len - 1)
        if self.min_len > max_len:
            raise UsageError(f"--min-len {self.min_len} is above the longest output allowed here ({max_len}: "
                             f"--max-len-a, --max-len-b, the model's positions and, with --max-len-from-target, "
                             f"the batch's longest reference)")
        device = src_tokens.device
        incremental_states: List[Dict[str, Dict[str, Optional[Tensor]]]] = [{} for _ in range(self.model.models_size)]
        encoder_outs = self.model.forward_encoder(net_input)
        copies = torch.arange(bsz, device=device).repeat_interleave(K)  # [bsz * K]: each sentence K times
        encoder_outs = self.model.reorder_encoder_out(encoder_outs, copies)

        tokens = torch.full((bsz * K, max_len + 2), self.pad, dtype=torch.long, device=device)  # BOS, tokens, EOS
        tokens[:, 0] = self.eos if bos_token is None else bos_token
        steps = torch.zeros(bsz * K, max_len + 1, device=device)  # [bsz * K, max_len + 1]: each token's log-prob
        live = torch.zeros(bsz, K, device=device)  # [bsz, K]: each live hypothesis's summed log-prob
        live[:, 1:] = -math.inf  # one hypothesis (BOS) to start from, not K copies of it
        attn: Optional[Tensor] = None  # [bsz * K, src_len, max_len + 2] where the model returns attention
        keep = max(K, self.nbest)  # ended hypotheses returned per sentence
        ended: List[List[Dict[str, Tensor]]] = [[] for _ in range(bsz)]
        best = torch.full((bsz, keep), -math.inf, device=device)  # [bsz, keep]: the best ended scores, descending
        done = torch.zeros(bsz, dtype=torch.bool, device=device)
        first = torch.arange(bsz, device=device)[:, None] * K  # [bsz, 1]: row of each sentence's first hypothesis
        reorder: Optional[Tensor] = None
        for step in range(max_len + 1):
            if reorder is not None:
                self.model.reorder_incremental_state(incremental_states, reorder)
            lprobs, step_attn = self.model.forward_decoder(tokens[:, :step + 1], encoder_outs, incremental_states,
                                                           self.temperature)  # [bsz * K, V], [bsz * K, src_len]
            lprobs[lprobs != lprobs] = -math.inf
            lprobs[:, self.pad] = -math.inf
            lprobs[:, self.unk] -= self.unk_penalty
            if step >= max_len:  # the last step: EOS only
                eos_lp = lprobs[:, self.eos].clone()
                lprobs.fill_(-math.inf)
                lprobs[:, self.eos] = eos_lp
            elif step < self.min_len:
                lprobs[:, self.eos] = -math.inf
            if self.token_indices_to_suppress is not None:
                lprobs[:, self.token_indices_to_suppress] = -math.inf
            if step_attn is not None:
                if attn is None:
                    attn = step_attn.new_zeros(bsz * K, step_attn.size(1), max_len + 2)
                attn[:, :, step + 1] = step_attn
            total = live.view(-1, 1) + lprobs  # [bsz * K, V]: each extension's summed log-prob

            # the hypotheses that end here: every live one extended by EOS; kept where it enters the sentence's best
            end = total[:, self.eos].view(bsz, K)  # [bsz, K]
            score = end / (step + 1) ** self.len_penalty if self.normalize_scores else end  # [bsz, K]
            score = score.masked_fill(done[:, None], -math.inf)
            entering = score > best[:, -1:]  # [bsz, K]
            for b, k in entering.nonzero().tolist():
                row = b * K + k
                pos = torch.cat([steps[row, :step], lprobs[row, self.eos:self.eos + 1]])  # [step + 1]
                out = torch.cat([tokens[row, 1:step + 1], tokens.new_tensor([self.eos])])  # [step + 1]
                ended[b].append({"tokens": out, "score": score[b, k], "positional_scores": pos,
                                 "alignment": torch.empty(0),
                                 # a copy: a view would keep the whole [bsz * K, src_len, max_len + 2] buffer alive
                                 "attention": attn[row, :, 1:step + 2].clone() if attn is not None else torch.empty(0)})
            best = torch.cat([best, score], dim=1).topk(keep, dim=1).values

            # the hypotheses that go on: the K best extensions by another token, over all of a sentence's live ones
            total[:, self.eos] = -math.inf
            live, index = total.view(bsz, K * V).topk(K, dim=1)  # [bsz, K]
            rows = (first + torch.div(index, V, rounding_mode="floor")).view(-1)  # [bsz * K]: the row each extends
            chosen = (index % V).view(-1)  # [bsz * K]
            tokens = tokens[rows]
            tokens[:, step + 1] = chosen
            steps = steps[rows]
            steps[:, step] = lprobs[rows, chosen]
            if attn is not None:
                attn = attn[rows]

            # a sentence is done when its nbest-th best ended hypothesis is at or above every live one's bound
            bound = self._bound(live, step, max_len).max(dim=1).values  # [bsz]
            done |= (best[:, self.nbest - 1] >= bound) | ~live.isfinite().any(dim=1)
            if bool(done.all()):
                break
            live = live.masked_fill(done[:, None], -math.inf)
            reorder = rows
        for b in range(bsz):
            ended[b] = sorted(ended[b], key=lambda h: float(h["score"]), reverse=True)[:keep]
        return ended
