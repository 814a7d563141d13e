"""Load fairseq checkpoints under torch >= 2.6 without switching torch.load's safety off for the whole process.

fairseq checkpoints pickle argparse Namespaces and omegaconf configs, which torch >= 2.6's default
`torch.load(weights_only=True)` refuses, so fairseq-generate and resuming fail (shared notes, fairseq-host.md
trap 2). Until 2026-11-23 importing this package set TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 for the process and its
children. Now only fairseq's own checkpoint loader, `fairseq.checkpoint_utils.load_checkpoint_to_cpu` (used by
fairseq-train to resume and by fairseq-generate, and so by everything here), runs with that setting, for the
duration of the call: it loads the files a user points fairseq at (`--path`, `--save-dir`, `--restore-file`).
Every other torch.load in the process keeps torch's default. Our own loaders pass `weights_only=False` explicitly.
"""
import functools
import os

_VAR = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"


def wrap_fairseq_loader() -> None:
    """Wrap fairseq's load_checkpoint_to_cpu once (idempotent)."""
    from fairseq import checkpoint_utils

    original = checkpoint_utils.load_checkpoint_to_cpu
    if getattr(original, "_compgen_wrapped", False):
        return

    @functools.wraps(original)
    def load_checkpoint_to_cpu(*args, **kwargs):
        previous = os.environ.get(_VAR)
        os.environ[_VAR] = "1"
        try:
            return original(*args, **kwargs)
        finally:
            if previous is None:
                del os.environ[_VAR]
            else:
                os.environ[_VAR] = previous

    load_checkpoint_to_cpu._compgen_wrapped = True
    checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu
