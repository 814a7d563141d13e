"""Dropout whose keep-mask is drawn from 15-bit uniform integers, four from each 64-bit draw of the generator.

Dropout (Srivastava et al. 2014): each element kept with probability 1 - p, kept elements scaled by 1 / (1 - p).
What differs from `torch.nn.functional.dropout` is how the mask is drawn, for speed on CPU, where the draws
dominate (a profile of a rel-uni SCAN training step put `bernoulli_` at ~19% of its CPU time, and, after it was
replaced by `rand >= p`, still put the uniform draws at ~10%):

* one int64 draw (`random_()`: uniform on [0, 2^63)) gives four 15-bit uniforms on [0, 2^15), its four 16-bit
  lanes with the top bit cleared (bits 0-14, 16-30, 32-46, 48-62); an element is dropped when its uniform is
  below round(p * 2^15). So p is rounded to a multiple of 2^-15 (0.1 -> 3277 / 32768 = 0.1000061), and kept
  elements are scaled by 2^15 / (2^15 - round(p * 2^15)), which keeps E[dropout(x)] = x exactly;
* the scaled mask is built in place and saved as one float tensor, so forward and backward are one
  multiplication each (the saved mask takes 4 bytes per element instead of F.dropout's 1).

Measured on one core, forward + backward at SCAN sizes: ~1.7x faster than F.dropout with `rand >= p` (2026-11-23),
and this mask faster again (docs/results.md, "Speed on CPU", measured side by side). The masks come from the global
generator, so runs stay reproducible under `--seed`; they are not the masks F.dropout (or this module before
2026-11-26, `rand >= p`) would draw.
"""
import math

import torch
import torch.nn as nn
from torch import Tensor
from torch.autograd.function import once_differentiable

from fairseq_compgen.errors import UsageError


LEVELS = 1 << 15  # the uniforms of the keep-mask take LEVELS values


def dropped_levels(p: float) -> int:
    """How many of the LEVELS values drop an element: p rounded to a multiple of 1 / LEVELS."""
    return round(p * LEVELS)


def scaled_keep_mask(shape, p: float, dtype: torch.dtype, device) -> Tensor:
    """[shape] of dtype: LEVELS / (LEVELS - dropped) where kept, 0 where dropped (see the module's docstring)."""
    n, dropped = math.prod(shape), dropped_levels(p)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_()  # [ceil(n/4)], on [0, 2^63)
    uniform = words.view(torch.int16)[:n].view(shape).bitwise_and_(LEVELS - 1)  # [shape], on [0, 2^15)
    return uniform.ge_(dropped).to(dtype).mul_(LEVELS / (LEVELS - dropped))


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:
        # [x.shape]: float32 also for a bf16/fp16 x (autocast, --fp16), so that the scale is not rounded to bf16
        # in the mask; what remains is the scale rounded to bf16 in the output, as any bf16 computation rounds it
        mask_dtype = torch.float32 if x.dtype in (torch.bfloat16, torch.float16) else x.dtype
        scaled_keep = scaled_keep_mask(x.shape, p, mask_dtype, x.device)
        ctx.save_for_backward(scaled_keep)
        return (x * scaled_keep).to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        (scaled_keep,) = ctx.saved_tensors
        return (grad * scaled_keep).to(grad.dtype), None


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """x [any shape] -> x with each element zeroed with probability p and the rest scaled by 1/(1-p)."""
    if not training or p == 0.0:
        return x
    if p == 1.0 or dropped_levels(p) == LEVELS:
        return torch.zeros_like(x)
    return _Dropout.apply(x, p)


class Dropout(nn.Module):
    """`nn.Dropout` with the mask of `dropout` above."""

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise UsageError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
