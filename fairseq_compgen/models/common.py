"""What the model files of this folder share: fairseq's encoder output type, two helpers for the parsed
options and one for decoding's reorders (no mechanism of any paper here; each model file cites its own)."""
from typing import Dict, Iterable, List, Optional

import torch
from torch import Tensor

from fairseq_compgen.errors import UsageError

EncoderOut = Dict[str, List[Tensor]]  # fairseq's TorchScript-compatible encoder output ("encoder_out", ...)


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False, "none": False}


def bool_flag(x) -> bool:
    """A boolean option: a bool, or the text "True"/"False" (an old checkpoint's args), read as text. fairseq's
    `fairseq.utils.eval_bool` would eval() it, which runs whatever a checkpoint's setting says (checkpoint_loading refuses
    such settings first)."""
    if not isinstance(x, str):
        return bool(x)
    try:
        return _BOOL_TEXT[x.strip().lower()]
    except KeyError:
        raise UsageError(f"a boolean setting holds {x!r}: expected True or False") from None


def set_default(args, name, value) -> None:
    """An architecture preset's default: `args.name = value` unless the command line (or the checkpoint) set it."""
    if getattr(args, name, None) is None:
        setattr(args, name, value)


def unchanged_order(new_order: Tensor, tensors: Iterable[Optional[Tensor]]) -> bool:
    """True when reordering every tensor along dim 0 by `new_order` would leave it as it is: `new_order` is 0..n-1
    and every tensor has n rows. fairseq's SequenceGenerator reorders the encoder output and every decoding cache
    at each step; in greedy decoding (beam 1) the order is the identity at every step where no sentence finished,
    and index_select would copy every cached key and value for nothing. One comparison of n indices per step (on
    a GPU, one synchronization; the generator makes several per step already)."""
    n = new_order.numel()
    if any(t is not None and (t.dim() == 0 or t.size(0) != n) for t in tensors):
        return False
    return torch.equal(new_order, torch.arange(n, dtype=new_order.dtype, device=new_order.device))


def reorder_encoder_out(encoder_out: EncoderOut, new_order: Tensor) -> EncoderOut:
    """A batch-first encoder output's tensors reordered along the batch (beam search), or the output as it is where
    the reorder would change nothing (unchanged_order)."""
    if unchanged_order(new_order, (t for v in encoder_out.values() for t in v)):
        return encoder_out
    return {k: [t.index_select(0, new_order) for t in v] for k, v in encoder_out.items()}
