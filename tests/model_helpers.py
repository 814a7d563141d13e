"""Test shorthands over fairseq_compgen.models.standalone, and a loader for the `fairseq-compgen prep` modules."""
import importlib.util

import fairseq_compgen
from fairseq_compgen.models.standalone import build_model as build  # noqa: F401
from fairseq_compgen.models.standalone import compgen_archs, make_dictionary  # noqa: F401

fairseq_compgen.register()


def data_prep_script(name: str):
    """`fairseq-compgen prep <name>` (the dataset module fairseq_compgen.data.<name>, a fresh copy at each call:
    its functions may be replaced through ``.module``) as an object with ``main(argv)``."""
    from fairseq_compgen.prep import OneFileDataset

    spec = importlib.util.find_spec(f"fairseq_compgen.data.{name}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return OneFileDataset(name, mod)


TINY_SIZE = ["--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
             "--decoder-ffn-embed-dim", "64"]


def build_task(data, arch, extra=(), task="compgen"):
    """(task, model, criterion) as fairseq-train builds them from a command line: `data`, --arch, tiny sizes, extra."""
    import torch
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", task, "--arch", arch, "--cpu", "--optimizer", "adam", *TINY_SIZE, *extra])
    cfg = convert_namespace_to_omegaconf(args)
    t = tasks.setup_task(cfg.task)
    torch.manual_seed(0)
    return t, t.build_model(cfg.model), t.build_criterion(cfg.criterion)


def first_batch(task, split, max_sentences=16):
    """The first batch of `split` (loaded if needed), in fairseq's order."""
    if split not in task.datasets:
        task.load_dataset(split)
    itr = task.get_batch_iterator(task.dataset(split), max_sentences=max_sentences, seed=1)
    return next(itr.next_epoch_itr(shuffle=False))
