"""The `cogs_tagging` task and criterion: COGS as sequence tagging.

Ontañón, Ainslie, Cvicek & Fisher (2022), "Making Transformers Solve
Compositional Tasks", ACL, Section 4.5.1 and App. D.  Data: the text files
of fairseq-compgen prep cogs_tagging (``SUBSET.{src,parent,role,category,noun_type,
verb_name,lf}``), loaded in memory (COGS is small).  Source tokens in (no
BOS/EOS, right-padded), 5 tags out, aligned 1:1 with the tokens; the model is
`compgen_tagger` (fairseq_compgen/models/tagger.py).

Loss (criterion `cogs_tagging`): mean of the 5 cross-entropies over non-pad
tokens (as the released code).  Validation logs ``tag_accuracy`` (all 5 tags
right at every token: the released code's metric) and ``exact_match`` (the
logical form rebuilt from the predicted tags by
fairseq_compgen/data/cogs_tagging.py equals the reference).

    fairseq-train DATA --user-dir fairseq_compgen --task cogs_tagging --arch compgen_tagger \
        --criterion cogs_tagging --optimizer adam --lr 5e-4 --batch-size 64 --max-epoch 16 \
        --valid-subset valid,gen --best-checkpoint-metric exact_match --maximize-best-checkpoint-metric

(`fairseq-compgen train` sets the task, criterion and best metric by itself for a tagging folder.)  Decoding a
checkpoint on a subset, in fairseq-generate's line format: fairseq_compgen/tasks/cogs_tagging_generate.py.
Vocabularies are the ``dict.*.txt`` files of the data folder, so a checkpoint always decodes with the ids it
was trained with.
"""

import logging
import os
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.data import Dictionary, FairseqDataset
from fairseq.tasks import FairseqTask, register_task

from fairseq_compgen.data import cogs_tagging as ct
from fairseq_compgen.data.io import DataError, read_data_lines
from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.parent_heads import IGNORE
from fairseq_compgen.tasks.autocast import AutocastConfig
from fairseq_compgen.tasks.batching import RandomBatchesConfig, batch_iterator_options, training_order
from fairseq_compgen.tasks.checkpoint_guard import fingerprint, guard, model_name
from fairseq_compgen.tasks.divergence import CheckedTrainStep

logger = logging.getLogger(__name__)
TAG_FIELDS = ct.FIELDS[1:]  # role, category, noun_type, verb_name (parent is a position)
SUBSETS = ("train", "valid", "test", "gen")


def _read(path):
    return read_data_lines(path, "COGS tagging file (made by fairseq-compgen prep cogs_tagging)")


def _load_dict(data, name):
    path = os.path.join(data, f"dict.{name}.txt")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"COGS tagging dictionary not found: {path} (written by fairseq-compgen prep cogs_tagging; "
                                f"re-run it if the folder predates the dictionaries)")
    return Dictionary.load(path)


class TaggingDataset(FairseqDataset):
    def __init__(self, src, tags, lfs, src_dict, tag_dicts, empty_as_pad=False):
        self.src, self.tags, self.lfs = src, tags, lfs
        self.src_dict, self.tag_dicts = src_dict, tag_dicts
        # tag string -> id; with empty_as_pad the empty tag gets the padding id (ignored by loss and metric)
        self.empty_ids = {f: (d.pad() if empty_as_pad else d.index(ct.EMPTY)) for f, d in tag_dicts.items()}
        self.sizes = np.array([len(s.split()) for s in src])

    def __getitem__(self, i):
        words = self.src[i].split()
        t = self.tags[i]
        return {
            "id": i,
            "src": torch.LongTensor([self.src_dict.index(w) for w in words]),
            "parent": torch.LongTensor(t.parent),  # position, -1 = none (the model's parent head maps it to classes)
            **{f: torch.LongTensor([self.tag_dicts[f].index(x) if x else self.empty_ids[f] for x in getattr(t, f)])
               for f in TAG_FIELDS},
        }

    def __len__(self):
        return len(self.src)

    def num_tokens(self, i):
        return int(self.sizes[i])

    def size(self, i):
        return int(self.sizes[i])

    def ordered_indices(self):  # fairseq's equal-length batches (--random-batches: tasks/batching.py)
        return np.argsort(self.sizes, kind="mergesort")

    def collater(self, samples):
        if not samples:
            return {}
        n = max(len(s["src"]) for s in samples)
        pad = self.src_dict.pad()

        def stack(key, value):
            out = torch.full((len(samples), n), value, dtype=torch.long)
            for b, s in enumerate(samples):
                out[b, : len(s[key])] = s[key]
            return out

        target = {"parent": stack("parent", IGNORE), **{f: stack(f, self.tag_dicts[f].pad()) for f in TAG_FIELDS}}
        return {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "src_text": [self.src[s["id"]] for s in samples],
            "lf": [self.lfs[s["id"]] for s in samples],
            "nsentences": len(samples),
            "ntokens": sum(len(s["src"]) for s in samples),
            "net_input": {"src_tokens": stack("src", pad), "src_lengths": torch.LongTensor([len(s["src"]) for s in samples])},
            "target": target,
        }


@dataclass
class CogsTaggingConfig(AutocastConfig, RandomBatchesConfig):
    data: str = field(default="", metadata={"help": "folder written by fairseq-compgen prep cogs_tagging"})
    empty_tags_as_padding: bool = field(default=False, metadata={
        "help": "a reading of the authors' code (cogs_tagging.ipynb: loss and metric skip targets equal to PAD, id 0), "
                "in which an empty tag shares id 0 with PAD: empty role/category/noun-type/verb-name targets are "
                "left out of the loss and of tag_accuracy. The model is then never taught to predict an empty tag, "
                "so exact_match (the logical form rebuilt from every predicted tag) is not meaningful; compare "
                "tag_accuracy"})


@register_task("cogs_tagging", dataclass=CogsTaggingConfig)
class CogsTaggingTask(CheckedTrainStep, FairseqTask):  # train_step: --autocast-bf16, one-line divergence
    def __init__(self, cfg, src_dict, tag_dicts, max_sentence_length=0):
        super().__init__(cfg)
        self.src_dict, self.tag_dictionaries = src_dict, tag_dicts
        self.max_sentence_length = max_sentence_length  # over every subset: the absolute/relative parent classes

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        # Vocabularies: the dictionaries written by fairseq-compgen prep cogs_tagging (over every subset: gen words known)
        src_dict = _load_dict(cfg.data, "src")
        tag_dicts = {f: _load_dict(cfg.data, f) for f in TAG_FIELDS}
        longest = 0
        for sub in SUBSETS:
            if os.path.isfile(os.path.join(cfg.data, f"{sub}.src")):
                longest = max([longest] + [len(line.split()) for line in _read(os.path.join(cfg.data, f"{sub}.src"))])
        if not longest:
            raise FileNotFoundError(f"no COGS tagging subsets ({', '.join(s + '.src' for s in SUBSETS)}) in "
                                    f"{cfg.data!r} (made by fairseq-compgen prep cogs_tagging)")
        logger.info("cogs_tagging: %d source words; tags %s; longest sentence %d", len(src_dict),
                    {f: len(d) for f, d in tag_dicts.items()}, longest)
        return cls(cfg, src_dict, tag_dicts, longest)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        base = os.path.join(self.cfg.data, split)
        src, lfs = _read(base + ".src"), _read(base + ".lf")
        cols = {f: _read(f"{base}.{f}") for f in ct.FIELDS}
        tags = []
        for k, s in enumerate(src):
            n = len(s.split())
            for f in ct.FIELDS:  # name the tag file that is wrong, not always .parent
                if k >= len(cols[f]):
                    raise DataError(f"{base}.{f}", len(cols[f]) + 1, f"a line for every line of {base}.src "
                                                                   f"({len(src)})")
                if len(cols[f][k].split()) != n:
                    raise DataError(f"{base}.{f}", k + 1, f"{n} tags (one per token of {base}.src)", cols[f][k])
            try:
                t = ct.tags_from_lines({f: cols[f][k] for f in ct.FIELDS})
            except ct.TaggingError as e:
                raise DataError(f"{base}.parent", k + 1, f"tag lines aligned with {base}.src ({e})", s) from None
            tags.append(t)
        self.datasets[split] = training_order(TaggingDataset(src, tags, lfs, self.src_dict, self.tag_dictionaries,
                                                             self.cfg.empty_tags_as_padding), split, self.cfg)
        logger.info("cogs_tagging %s: %d examples", split, len(src))

    def build_model(self, cfg, from_checkpoint=False):
        if model_name(cfg) != "compgen_tagger":  # a traceback in the loss before
            raise UsageError(f"--task cogs_tagging trains a tagger: expected --arch compgen_tagger (or one of its "
                             f"presets, ontanon_tagging_*), got --arch {cfg.arch}")
        fp = fingerprint(self.src_dict, *(self.tag_dictionaries[f] for f in TAG_FIELDS))
        guard(cfg, fp, self.cfg.data, from_checkpoint, self)
        return super().build_model(cfg, from_checkpoint)

    def build_criterion(self, cfg, from_checkpoint=False):
        name = getattr(cfg, "_name", None)
        if name != "cogs_tagging":  # fairseq's default criterion raised a bare NotImplementedError in training
            raise UsageError(f"--task cogs_tagging trains with --criterion cogs_tagging, got --criterion {name}")
        return super().build_criterion(cfg, from_checkpoint)

    @property
    def source_dictionary(self):
        return self.src_dict

    @property
    def target_dictionary(self):
        return None

    def max_positions(self):
        return None

    def get_batch_iterator(self, dataset, *args, required_batch_size_multiple=1, **kwargs):
        kwargs = batch_iterator_options(dataset, kwargs)  # loader workers; the seed of epoch 1's batches
        return super().get_batch_iterator(dataset, *args, required_batch_size_multiple=1, **kwargs)

    def predict(self, model, sample):
        """Greedy tags of a batch: per example (id, correct tags?, rebuilt logical form or None, error).

        A prediction is correct (``tags_ok``) when all 5 tags are right at every token (the authors' metric; with
        --empty-tags-as-padding only where the reference tag is not empty);
        the logical form is rebuilt from the predicted tags (None, with the reason, when they describe none).
        """
        model.eval()
        with torch.no_grad():
            net_output = model(**sample["net_input"])
        pred = {f: net_output[f].argmax(-1) for f in TAG_FIELDS}
        pred["parent"] = model.parent_head.to_parents(net_output["parent"].argmax(-1))
        pred = {f: t.cpu() for f, t in pred.items()}
        target = {f: t.cpu() for f, t in sample["target"].items()}
        pads = {"parent": IGNORE, **{f: self.tag_dictionaries[f].pad() for f in TAG_FIELDS}}  # targets not scored
        tags_ok = torch.ones(len(sample["src_text"]), dtype=torch.bool)  # [B]; padding positions hold pad targets
        for f in pred:
            tags_ok &= ((pred[f] == target[f]) | (target[f] == pads[f])).all(1)
        out = []
        for b, words in enumerate(sample["src_text"]):
            n = len(words.split())
            tags = ct.Tags(
                pred["parent"][b, :n].tolist(),
                *[[("" if x == ct.EMPTY else x) for x in (self.tag_dictionaries[f][i] for i in pred[f][b, :n].tolist())]
                  for f in TAG_FIELDS],
            )
            try:
                lf, error = ct.from_tags(words, tags), None
            except ct.TaggingError as e:  # tags that describe no logical form: wrong
                lf, error = None, str(e)
            out.append((int(sample["id"][b]), bool(tags_ok[b]), lf, error))
        return out

    def valid_step(self, sample, model, criterion):
        loss, sample_size, log = super().valid_step(sample, model, criterion)
        pred = self.predict(model, sample)
        log["exact_match_n"] = sum(lf == ref for (_, _, lf, _), ref in zip(pred, sample["lf"]))
        log["tag_accuracy_n"] = sum(ok for _, ok, _, _ in pred)
        return loss, sample_size, log

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        n = sum(log.get("nsentences", 0) for log in logging_outputs)
        for key in ("exact_match", "tag_accuracy"):
            if any(f"{key}_n" in log for log in logging_outputs) and n:
                total = sum(log.get(f"{key}_n", 0) for log in logging_outputs)
                metrics.log_scalar(key, total / n, n, priority=0, round=4)  # weighted: called once per batch


@register_criterion("cogs_tagging")
class CogsTaggingCriterion(FairseqCriterion):
    """Mean of the 5 per-token cross-entropies (parent + 4 tag heads), summed over non-pad tokens."""

    def __init__(self, task):
        if not isinstance(task, CogsTaggingTask):  # an AttributeError in the first step before
            raise UsageError(f"--criterion cogs_tagging needs --task cogs_tagging (and --arch compgen_tagger), got "
                             f"--task {getattr(task.cfg, '_name', type(task).__name__)}")
        super().__init__(task)

    def forward(self, model, sample, reduce=True):
        out = model(**sample["net_input"])
        tgt = sample["target"]
        ntokens = sample["ntokens"]
        parent = model.parent_head.to_classes(tgt["parent"])  # [B, S] class ids, IGNORE at padding
        loss = F.cross_entropy(out["parent"].flatten(0, 1).float(), parent.flatten(), ignore_index=IGNORE,
                               reduction="sum")
        for f in TAG_FIELDS:
            pad = self.task.tag_dictionaries[f].pad()
            loss = loss + F.cross_entropy(out[f].flatten(0, 1).float(), tgt[f].flatten(), ignore_index=pad,
                                          reduction="sum")
        loss = loss / 5
        log = {"loss": loss.data, "ntokens": ntokens, "nsentences": sample["nsentences"], "sample_size": ntokens}
        return loss, ntokens, log

    @staticmethod
    def reduce_metrics(logging_outputs):
        loss = sum(log.get("loss", 0) for log in logging_outputs)
        n = sum(log.get("sample_size", 0) for log in logging_outputs)
        metrics.log_scalar("loss", float(loss) / max(n, 1) / np.log(2), n, round=3)

    @staticmethod
    def logging_outputs_can_be_summed():
        return True
