"""The `compgen` task: fairseq's translation task plus the evaluation compositional-generalization papers use.

* During validation (unless `--no-eval-accuracy`) it logs, on every `--valid-subset` (e.g. `valid,gen`), the
  exact-match sequence accuracy of greedy decoding as Csordás et al. (2021) define it (App. A and their code: all tokens and
  the length match), as `accuracy` per subset, so `--best-checkpoint-metric accuracy
  --maximize-best-checkpoint-metric` selects by accuracy (fairseq selects on the *first* listed valid subset). No
  early stopping is implied. The verdict is computed from one teacher-forced pass, which gives the greedy
  decoder's verdict without decoding step by step (`tasks/greedy.py`); `--eval-greedy` also decodes step by step
  and logs that as `greedy_accuracy`, a cross-check that must equal `accuracy`.
* `tf_accuracy` (on by default, `--no-eval-tf-accuracy` to skip): Ontañón et al.'s notebook metric, teacher-forced argmax cut
  at the first EOS (the authors' notebook); equal to `accuracy` for a deterministic model, logged for comparison.
* `--eval-oracle-length` also logs `oracle_accuracy` (decode to the reference length, EOS forbidden).
* Every input gets a hypothesis: batches are built with `required_batch_size_multiple = 1`, because fairseq
  drops a final batch whose size is not a multiple (its batch_by_size, since Dec. 2022) and batches are
  length-sorted, so the dropped sentences would be the longest ones.
* No example is dropped silently for being longer than --max-source-positions / --max-target-positions: for
  train that is an error unless `--allow-dropping-train-examples` (fairseq drops them with a warning only); for
  validation it is fairseq's error unless `--skip-invalid-size-inputs-valid-test`, and then `skipped` is logged
  beside the metrics and exact match counts the skipped examples as wrong (`--exclude-skipped-from-accuracy`
  to leave them out of the denominators). Examples validation never reaches (fairseq's `--max-valid-steps`: the
  longest, as batches are length-sorted) count as wrong too, with a warning.
"""
import logging
import os
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq import metrics, utils
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from omegaconf import II

from fairseq_compgen.errors import UsageError
from fairseq_compgen.tasks import batch_chunks, beam_stop
from fairseq_compgen.tasks.autocast import AutocastConfig
from fairseq_compgen.tasks.batch_chunks import BatchChunksConfig
from fairseq_compgen.tasks.batching import RandomBatchesConfig, batch_iterator_options, training_order
from fairseq_compgen.tasks.checkpoint_guard import fingerprint, guard, model_name
from fairseq_compgen.tasks.divergence import CheckedTrainStep
from fairseq_compgen.tasks.greedy import batch_exact_match, greedy_match_teacher_forced, teacher_forced_exact_match

logger = logging.getLogger(__name__)


@dataclass
class CompgenConfig(TranslationConfig, AutocastConfig, RandomBatchesConfig, BatchChunksConfig,
                    beam_stop.BeamStopConfig):
    # Both metrics are on by default; the flags switch them off (fairseq turns a True-default bool into a
    # store_false flag, which would make `--eval-accuracy` mean "off": negative names avoid that trap).
    no_eval_accuracy: bool = field(
        default=False,
        metadata={"help": "do not log `accuracy` (by default the exact-match accuracy of greedy decoding is logged per "
                          "validation subset, computed from one teacher-forced pass: tokens and length must match; "
                          "Csordás et al. 2021)"},
    )
    eval_greedy: bool = field(
        default=False,
        metadata={"help": "also decode greedily step by step and log `greedy_accuracy` (must equal `accuracy`, which "
                          "is computed from one teacher-forced pass; slower, a cross-check)"},
    )
    # fairseq's --max-valid-steps, read so that the task can say what it does to exact match (no flag of its own: a
    # field with an interpolated default and no help is not added to the parser)
    max_valid_steps: Optional[int] = II("dataset.max_valid_steps")
    no_eval_tf_accuracy: bool = field(
        default=False,
        metadata={"help": "do not log `tf_accuracy` (by default logged: Ontañón et al.'s notebook metric, "
                          "teacher-forced argmax cut at the first EOS, as the authors' notebook computes it, beside the greedy `accuracy`)"},
    )
    eval_oracle_length: bool = field(
        default=False,
        metadata={"help": "also log `oracle_accuracy`: EOS forbidden, decode exactly the reference length"},
    )
    max_len_from_target: bool = field(
        default=False,
        metadata={"help": "fairseq-generate with references: decode each batch for at most its longest reference + 1 "
                          "tokens (a longer hypothesis cannot be an exact match; an early checkpoint that never emits "
                          "EOS would otherwise decode to --max-len-b in every batch). Exact for greedy decoding "
                          "scored by exact match, where fairseq-compgen eval sets it; not for a beam, sampling, BLEU "
                          "or COMP, where the cut changes which hypothesis is returned or what is scored"},
    )
    allow_dropping_train_examples: bool = field(
        default=False,
        metadata={"help": "train even if some training examples are longer than --max-source-positions / "
                          "--max-target-positions (they are dropped, and their count logged); by default that is "
                          "an error, since fairseq would drop them with a warning only"},
    )
    exclude_skipped_from_accuracy: bool = field(
        default=False,
        metadata={"help": "with --skip-invalid-size-inputs-valid-test: leave the skipped (too long) validation "
                          "examples out of the exact-match denominators; by default they count as wrong, and "
                          "`skipped` is logged beside the metrics either way"},
    )
    eval_comp: str = field(
        default="",
        metadata={"help": "COMP metadata (test.comp of fairseq-compgen prep noun_adj): log `comp` (share of greedy "
                          "hypotheses with the French adjective and noun) on the subset it belongs to"},
    )
    eval_comp_subset: str = field(
        default="", metadata={"help": "subset --eval-comp describes (default: its file name up to the first '.')"},
    )


class _ForwardRecorder:
    """The model, for the criterion in validation: keeps what the forward pass on exactly the batch's `net_input`
    returned, so that the accuracies need no second pass. Every other attribute is the model's."""

    def __init__(self, model, net_input):
        self._model, self._net_input, self.output = model, net_input, None

    def __call__(self, *args, **kwargs):
        out = self._model(*args, **kwargs)
        if not args and kwargs.keys() == self._net_input.keys() and all(
                kwargs[k] is v for k, v in self._net_input.items()):
            self.output = out
        return out

    def __getattr__(self, name):
        return getattr(self._model, name)


def _max_valid_steps(cfg) -> Optional[int]:
    """fairseq's --max-valid-steps from the task's config, or None: unset, or not resolvable (a config built without
    fairseq's dataset group, e.g. CompgenConfig() in a test, or a checkpoint's from before the field)."""
    try:
        steps = getattr(cfg, "max_valid_steps", None)
    except Exception:  # omegaconf's interpolation errors when the dataset group is absent
        return None
    return steps if isinstance(steps, int) else None


def _sum(logging_outputs, key):
    total = sum(log.get(key, 0) for log in logging_outputs)
    return total.item() if torch.is_tensor(total) else total


@register_task("compgen", dataclass=CompgenConfig)
class CompgenTask(CheckedTrainStep, TranslationTask):  # train_step: --batch-chunks, --autocast-bf16, one-line divergence
    cfg: CompgenConfig

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        try:
            return super().setup_task(cfg, **kwargs)
        except Exception as e:  # fairseq raises a bare Exception here
            if "Could not infer language pair" not in str(e):
                raise
            raise UsageError(f"{cfg.data}: no binarized language pair (train.SRC-TGT.SRC.idx) to infer --source-lang "
                             f"/ --target-lang from: not a folder made by fairseq-compgen prep (a COGS tagging folder needs "
                             f"--task cogs_tagging)") from None

    @classmethod
    def check_training_flags(cls, args) -> None:
        """The task's flags, checked by `fairseq-compgen train` before it writes anything (pipelines/train.py,
        on all of fairseq-train's parsed options) and when the task is built (on its own config)."""
        subset = getattr(args, "eval_comp_subset", None)
        if subset and not getattr(args, "eval_comp", None):  # ignored in silence before
            raise UsageError(f"--eval-comp-subset {subset} names the subset that --eval-comp's metadata is for: "
                             f"expected --eval-comp FILE with it")
        batch_chunks.check(getattr(args, "batch_chunks", 1), getattr(args, "random_positions", 0))
        half = [f"--{name.replace('_', '-')}" for name in ("fp16", "bf16", "memory_efficient_fp16",
                                                          "memory_efficient_bf16") if getattr(args, name, False)]
        if half and getattr(args, "autocast_bf16", False):  # refused when the trainer is built, too: after a traceback
            raise UsageError(f"--autocast-bf16 needs float32 weights: leave out {' / '.join(half)} (half-precision "
                             f"weights, fairseq's own mixed precision)")
        if half and getattr(args, "cpu", False):  # fairseq's trainer fails on CPU with a traceback (TPU or CUDA)
            raise UsageError(f"{half[0]} with --cpu: fairseq's half-precision training needs a GPU; on CPU, "
                             f"--autocast-bf16 trains with bf16 autocast and float32 weights")

    def __init__(self, cfg, src_dict, tgt_dict):
        self.check_training_flags(cfg)
        super().__init__(cfg, src_dict, tgt_dict)
        self._skipped = {}  # split -> examples dropped as too long (filter_indices_by_size)
        self._current_skipped = 0  # of the subset whose batches are being evaluated
        self._current_size = 0  # its examples, evaluated or not
        steps = _max_valid_steps(cfg)
        if steps is not None and not (cfg.no_eval_accuracy and cfg.no_eval_tf_accuracy):
            logger.warning("compgen: --max-valid-steps %d: validation stops after %d batch(es) of each subset (the "
                           "shortest examples: batches are length-sorted); exact match counts the examples it does "
                           "not reach as wrong", steps, steps + 1)

    def get_batch_iterator(self, dataset, *args, required_batch_size_multiple=1, **kwargs):
        kwargs = batch_iterator_options(dataset, kwargs)  # loader workers; the seed of epoch 1's batches
        if required_batch_size_multiple != 1:
            logger.info("compgen: using required_batch_size_multiple=1 instead of %d so that no example is dropped",
                        required_batch_size_multiple)
        itr = super().get_batch_iterator(dataset, *args, required_batch_size_multiple=1, **kwargs)
        # validation runs one subset at a time: reduce_metrics of the batches that follow reads this count
        self._current_skipped = self._skipped.get(self._split_of(dataset), 0)
        self._current_size = len(dataset)
        return itr

    def _split_of(self, dataset) -> str:
        return next((name for name, ds in self.datasets.items() if ds is dataset), "?")

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        """fairseq's filter, but a dropped example is never silent: an error for train (unless
        --allow-dropping-train-examples) and for other subsets without --skip-invalid-size-inputs-valid-test,
        otherwise a count kept for the metrics (`skipped`, and exact match counts them as wrong)."""
        split = self._split_of(dataset)
        kept, ignored = dataset.filter_indices_by_size(indices, max_positions)
        if len(ignored):
            size = dataset.size(ignored[0])  # numpy integers, (source, target) for a pair: plain ints in the message
            size = tuple(map(int, size)) if isinstance(size, (tuple, list)) else int(size)
            too_long = (f"{len(ignored)} of {len(indices)} {split} examples are longer than max positions "
                        f"{max_positions} (e.g. example {int(ignored[0])}, size {size})")
            if split == "train" and not self.cfg.allow_dropping_train_examples:
                raise UsageError(f"{too_long}: raise --max-source-positions / --max-target-positions, or pass "
                                 f"--allow-dropping-train-examples to drop them")
            if split != "train" and not ignore_invalid_inputs:
                raise UsageError(f"{too_long}: raise --max-source-positions / --max-target-positions, or pass "
                                 f"--skip-invalid-size-inputs-valid-test (exact match then counts them as wrong)")
            logger.warning("compgen: %s: dropped", too_long)
        self._skipped[split] = len(ignored)
        return kept

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        from fairseq_compgen.data.binarize import check_binarized

        src, tgt = self.cfg.source_lang, self.cfg.target_lang
        for folder in utils.split_paths(self.cfg.data):
            for pair in (f"{src}-{tgt}", f"{tgt}-{src}"):
                for lang in (src, tgt):
                    path = os.path.join(folder, f"{split}.{pair}.{lang}.bin")
                    if os.path.isfile(path) and os.path.getsize(path) == 0:  # numpy: "cannot mmap an empty file"
                        raise UsageError(f"{path} is empty: subset {split!r} has no examples; rerun its `fairseq-compgen prep` "
                                         f"command or leave {split!r} out of --valid-subset / --gen-subset")
                    if os.path.isfile(path[: -len(".bin")] + ".idx"):
                        check_binarized(path[: -len(".bin")])  # a truncated pair: numpy's error names no file
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        self.datasets[split] = training_order(self.datasets[split], split, self.cfg)  # --random-batches
        if self.cfg.eval_comp and split == (self.cfg.eval_comp_subset or os.path.basename(self.cfg.eval_comp).split(".")[0]):
            from fairseq_compgen.scoring.comp import read_meta
            self._comp_meta = read_meta(self.cfg.eval_comp)
            ds = self.datasets[split]
            if len(self._comp_meta) != len(ds):
                raise UsageError(f"--eval-comp {self.cfg.eval_comp}: {len(self._comp_meta)} lines for {len(ds)} {split} examples")
            collate = ds.collater
            ds.collater = lambda samples, **kw: {**collate(samples, **kw), "comp_subset": split} if samples else collate(samples, **kw)

    def build_generator(self, models, args, *rest, **kwargs):
        if getattr(args, "print_alignment", None):  # an attn=[None] traceback in fairseq's generator before
            raise UsageError(f"--print-alignment {args.print_alignment}: this task's models return no attention "
                             f"weights to align with; leave it out")
        if self.cfg.beam_stop == "bound":  # --beam-stop bound: tasks/beam_stop.py
            beam_stop.check(args)
            kwargs["seq_gen_cls"] = beam_stop.BoundedBeamSearch
            kwargs["extra_gen_cls_kwargs"] = {**(kwargs.get("extra_gen_cls_kwargs") or {}),
                                              "nbest": getattr(args, "nbest", 1)}
        return super().build_generator(models, args, *rest, **kwargs)

    def build_model(self, cfg, from_checkpoint=False):
        if model_name(cfg) == "compgen_tagger":  # an AttributeError traceback before
            raise UsageError(f"--arch {cfg.arch} is a COGS tagger (compgen_tagger): it trains with --task cogs_tagging "
                             f"--criterion cogs_tagging on a folder of `fairseq-compgen prep cogs_tagging`")
        guard(cfg, fingerprint(self.src_dict, self.tgt_dict), self.cfg.data, from_checkpoint, self)
        if not from_checkpoint:  # the model's flags meet the task's (plain fairseq-train; train.py checked them before)
            batch_chunks.check(self.cfg.batch_chunks, getattr(cfg, "random_positions", 0))
        return super().build_model(cfg, from_checkpoint)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        target = sample.get("target")
        if not self.cfg.max_len_from_target or target is None or not hasattr(generator, "max_len_b"):
            return super().inference_step(generator, models, sample, prefix_tokens, constraints)
        # SequenceGenerator lets a hypothesis choose freely for max_len steps, then forces EOS; with
        # max_len = longest reference (tokens + EOS) every reference length + EOS is still reachable
        saved = generator.max_len_a, generator.max_len_b
        generator.max_len_a, generator.max_len_b = 0, int(target.ne(self.tgt_dict.pad()).sum(1).max())
        try:
            return super().inference_step(generator, models, sample, prefix_tokens, constraints)
        finally:
            generator.max_len_a, generator.max_len_b = saved

    def valid_step(self, sample, model, criterion):
        # one teacher-forced pass serves the loss, `accuracy` and `tf_accuracy`: the criterion's own forward pass
        # on the batch is kept (it runs in eval mode under no_grad, as a second pass would)
        recorder = _ForwardRecorder(model, sample["net_input"])
        loss, sample_size, logging_output = super().valid_step(sample, recorder, criterion)
        pad, eos = self.tgt_dict.pad(), self.tgt_dict.eos()
        net_output = recorder.output
        if net_output is None and not (self.cfg.no_eval_accuracy and self.cfg.no_eval_tf_accuracy):
            with torch.no_grad():  # a criterion that did not call the model on the batch as it is
                net_output = model(**sample["net_input"])
        if not self.cfg.no_eval_accuracy:
            correct = greedy_match_teacher_forced(model, sample, pad, net_output)
            logging_output["_em_correct"] = int(correct.sum())
            logging_output["_em_total"] = correct.numel()
        if self.cfg.eval_greedy:
            logging_output["_em_greedy_correct"] = int(batch_exact_match(model, sample, pad, eos).sum())
            logging_output.setdefault("_em_total", sample["target"].size(0))
        if not self.cfg.no_eval_tf_accuracy:
            logging_output["_em_tf_correct"] = int(teacher_forced_exact_match(model, sample, pad, eos, net_output).sum())
            logging_output.setdefault("_em_total", sample["target"].size(0))
        if self.cfg.eval_oracle_length:
            logging_output["_em_oracle_correct"] = int(batch_exact_match(model, sample, pad, eos, oracle=True).sum())
            logging_output.setdefault("_em_total", sample["target"].size(0))
        if "comp_subset" in sample:
            from fairseq_compgen.pipelines.evaluate import FAIRSEQ_MAX_LEN
            from fairseq_compgen.scoring.comp import comp_hit
            from fairseq_compgen.tasks.greedy import greedy_decode
            net = sample["net_input"]
            # hypotheses as long as `fairseq-compgen eval --metric comp` lets them run (fairseq-generate's limit,
            # --max-len-a 0 --max-len-b 200, below the decoder's positions), so that the in-loop and the final COMP
            # score the same outputs (it stopped at 2 T + 10 tokens, T the batch's longest target)
            steps = min(int(FAIRSEQ_MAX_LEN[0] * net["src_tokens"].size(1) + FAIRSEQ_MAX_LEN[1]),
                        model.max_decoder_positions() - 1)
            pred = greedy_decode(model, net["src_tokens"], net["src_lengths"], steps, eos, pad=pad)
            hits = 0
            for i, row in zip(sample["id"].tolist(), pred.tolist()):
                row = row[: row.index(eos)] if eos in row else row
                m = self._comp_meta[i]
                hits += comp_hit(self.tgt_dict.string(torch.tensor(row)), m[2], m[3])
            logging_output["_comp_hits"], logging_output["_comp_total"] = hits, len(pred)
        return loss, sample_size, logging_output

    def _denominator(self, m) -> float:
        """Examples of the subset: those evaluated plus, unless --exclude-skipped-from-accuracy, those skipped, plus
        those validation never reached (fairseq's --max-valid-steps stops after that many batches, and batches are
        length-sorted: without them the accuracy would be that of the shortest examples), counted as wrong (the task
        says so when it is set up). fairseq also derives the metric after every batch, from the batches so far: only
        the value at the end of the subset, the one logged, has them all."""
        skipped = m["skipped"].avg if "skipped" in m else 0
        # the subset's size is evaluated + skipped + never reached; without it (a task not told), what was evaluated
        examples = m["_em_size"].avg if "_em_size" in m else m["_em_total"].sum + skipped
        return examples - (skipped if self.cfg.exclude_skipped_from_accuracy else 0)

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        if any("_comp_total" in log for log in logging_outputs):
            for key in ("_comp_hits", "_comp_total"):
                metrics.log_scalar_sum(key, _sum(logging_outputs, key))
            metrics.log_derived("comp", lambda m: round(m["_comp_hits"].sum / max(m["_comp_total"].sum, 1), 4))
        total = _sum(logging_outputs, "_em_total")
        if total == 0:
            return
        if self._current_skipped:  # constant over the subset's batches: the meter's average is it
            metrics.log_scalar("skipped", self._current_skipped, round=0)
        if self._current_size:  # likewise; a name starting with "_" is not printed
            metrics.log_scalar("_em_size", self._current_size, round=0)
        metrics.log_scalar_sum("_em_total", total)
        for key, name in (("_em_correct", "accuracy"), ("_em_greedy_correct", "greedy_accuracy"),
                          ("_em_oracle_correct", "oracle_accuracy"),
                          ("_em_tf_correct", "tf_accuracy")):
            if any(key in log for log in logging_outputs):
                metrics.log_scalar_sum(key, _sum(logging_outputs, key))
                metrics.log_derived(name, lambda m, key=key: round(m[key].sum / self._denominator(m), 4))
