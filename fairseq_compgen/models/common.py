"""What the model files of this folder share: fairseq's encoder output type and two helpers for the parsed
options (no mechanism of any paper here; each model file cites its own)."""
from typing import Dict, List

from fairseq import utils
from torch import Tensor

EncoderOut = Dict[str, List[Tensor]]  # fairseq's TorchScript-compatible encoder output ("encoder_out", ...)


def bool_flag(x) -> bool:
    """A boolean option as fairseq parses it: the string "True"/"False" (an old checkpoint's args) or a bool."""
    return utils.eval_bool(x) if isinstance(x, str) else bool(x)


def set_default(args, name, value) -> None:
    """An architecture preset's default: `args.name = value` unless the command line (or the checkpoint) set it."""
    if getattr(args, name, None) is None:
        setattr(args, name, value)
