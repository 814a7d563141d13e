"""`--random-batches`: training batches of sentences drawn at random, a new draw every epoch, instead of fairseq's
batches of sentences of one length.

fairseq sorts a training set by length and cuts it into batches (LanguagePairDataset.ordered_indices; the batches'
order is shuffled, their content is not), so every batch holds one length band: on SCAN, a batch of 256 one- or
two-action commands, then one of 26-action ones. The papers' own pipelines mix lengths in every batch:

* Csordás, Irie & Schmidhuber (2021), "The Devil is in the Detail: Simple Tricks Improve Systematic Generalization of
  Transformers", EMNLP: their code (github.com/RobertCsordas/transformer_generalization, framework/loader/sampler.py,
  InfiniteSampler, used by tasks/task.py's training loader) draws every training example uniformly at random, with
  replacement; Park & Kim (2024) use "the experimental settings from Csordás et al." (their §5.2);
* Ontañón et al. (2022), "Making Transformers Solve Compositional Tasks", ACL: a tf.data pipeline that shuffles
  the whole set, then batches.

Here each epoch is a random permutation of the training set cut into batches of --batch-size (every example once
per epoch; the with-replacement sampler may repeat or skip one within an epoch's worth of draws: the same in
expectation). fairseq calls ordered_indices under numpy_seed(seed + epoch), so a run resumed mid-epoch draws that
epoch's batches again exactly. Validation and test subsets keep fairseq's equal-length batches: their results do not
depend on the order, and equal lengths pad least.

fairseq's own batches (the default) are built once, when training starts, and kept for every epoch (only their
order is shuffled anew): sorted by length, with ties among equal lengths in the order of a permutation drawn under
numpy_seed(seed + epoch) of the epoch the process starts in. A run resumed in epoch E > 1 thus rebuilt them under
seed + E: batches of the same lengths holding other sentences than those of a run never stopped, whose weights it
then no longer equalled (found by an audit, 2026-11-29; every resume of the campaign's runs on fairseq's batches
after their first epoch, until then). FirstEpochOrder builds them as a run that starts in epoch 1 does, in every
process, so a resumed run trains on the batches of one never stopped.
"""
from dataclasses import dataclass, field

import numpy as np
from fairseq.data import BaseWrapperDataset, data_utils
from fairseq.dataclass import FairseqDataclass


@dataclass
class RandomBatchesConfig(FairseqDataclass):
    """The flag, shared by the tasks that train (compgen, cogs_tagging)."""
    random_batches: bool = field(default=False, metadata={
        "help": "train on batches of random sentences, drawn afresh every epoch (a shuffle of the training set, then "
                "batches of --batch-size: the sampling of Csordás et al.'s and Ontañón et al.'s own pipelines), "
                "instead of fairseq's batches of sentences of one length; validation keeps fairseq's batches"})


class RandomOrder(BaseWrapperDataset):
    """`dataset` whose batches are built from a random permutation, drawn again each epoch (see the module)."""

    def ordered_indices(self):
        return np.random.permutation(len(self)).astype(np.int64)  # under fairseq's numpy_seed(seed + epoch)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False  # fairseq then builds each epoch's batches anew, with that epoch's seed


class FirstEpochOrder(BaseWrapperDataset):
    """`dataset` (its own order: fairseq's batches) ordered as fairseq orders it in epoch 1, in whatever epoch the
    batches are built (see the module)."""

    seed = 1  # the batch iterator's seed, which batch_iterator_options sets before fairseq builds the batches

    def __getattr__(self, name):  # the rest of the dataset's own (src_sizes, src_dict, ...): it stands in for it
        if name == "dataset":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def ordered_indices(self):
        with data_utils.numpy_seed(self.seed + 1):  # fairseq: numpy_seed(seed + epoch), a run's first epoch being 1
            return self.dataset.ordered_indices()


def batch_iterator_options(dataset, kwargs: dict) -> dict:
    """The options of a task's get_batch_iterator for `dataset`, adjusted: the loader's workers (loader_workers) and
    FirstEpochOrder's seed (fairseq's trainer passes it as the keyword `seed`)."""
    if "num_workers" in kwargs:
        kwargs["num_workers"] = loader_workers(dataset, kwargs["num_workers"])
    if isinstance(dataset, FirstEpochOrder):
        dataset.seed = kwargs.get("seed", 1)
    return kwargs


def loader_workers(dataset, num_workers: int) -> int:
    """The --num-workers a task gives the batch iterator of `dataset`: none for random batches. fairseq keeps each
    loader's worker processes alive (persistent_workers) and builds a new loader every epoch for a dataset that cannot
    reuse its epoch iterator, as RandomOrder cannot: one more worker per epoch (about 0.9 GB resident each on SCAN)
    until the machine runs out of memory (a campaign run was killed so, 2026-11-29). SCAN-sized batches collate in
    the training process in a fraction of a step; the batches are the same."""
    return 0 if isinstance(dataset, RandomOrder) else num_workers


def training_order(dataset, split: str, cfg):
    """The dataset a task keeps for `split`: train in random order under --random-batches, else in the order of
    epoch 1 (FirstEpochOrder); any other split as it is."""
    if split != "train":
        return dataset
    return RandomOrder(dataset) if cfg.random_batches else FirstEpochOrder(dataset)
