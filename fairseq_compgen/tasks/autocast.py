"""`--autocast-bf16`: mixed-precision training on CPU (and CUDA) with torch.autocast and bfloat16.

fairseq's own precision flags do not serve a CPU: `--amp` is CUDA's fp16 autocast with a gradient scaler, and
`--bf16` casts the whole model, weights included, to bfloat16. This flag instead runs each *training* forward pass
(model and loss) under `torch.autocast(device, dtype=torch.bfloat16)`: matrix products run in bfloat16, while the
weights, gradients, Adam's state and the checkpoints stay float32 (autocast casts per operation; softmax,
log-softmax and the losses stay float32 under its rules). bfloat16 has float32's exponent range, so no loss scaler
is needed. Validation, `fairseq-compgen eval` and `fairseq-generate` run in float32 as always, so every reported
accuracy comes from the float32 weights.

On a CPU with AVX512-BF16 or AMX this buys time (measured with `benchmarks/train_step.py --autocast`); elsewhere
autocast still works but may be slower, and a warning says so. Whether accuracy holds is measured per model, not
assumed: docs/results.md, "Mixed precision on CPU".
"""
import logging
from dataclasses import dataclass, field

import torch
from fairseq.dataclass import FairseqDataclass

logger = logging.getLogger(__name__)


@dataclass
class AutocastConfig(FairseqDataclass):
    """The flag, shared by the tasks that train (compgen, cogs_tagging)."""
    autocast_bf16: bool = field(
        default=False,
        metadata={"help": "run each training forward pass under torch.autocast with bfloat16 (CPU or CUDA): matrix "
                          "products in bf16; weights, gradients, optimizer state and checkpoints stay fp32; "
                          "validation and generation stay fp32. For CPU training (fairseq's --amp is CUDA fp16 "
                          "and --bf16 casts the weights)"},
    )


class _AutocastCriterion:
    """The criterion, called under autocast; everything else (reduce_metrics, attributes) is the criterion's."""

    def __init__(self, criterion, device_type: str):
        self._criterion, self._device_type = criterion, device_type

    def __call__(self, model, sample, **kwargs):
        with torch.autocast(self._device_type, dtype=torch.bfloat16):
            return self._criterion(model, sample, **kwargs)

    def __getattr__(self, name):
        return getattr(self._criterion, name)


_warned = set()


def hardware_bf16(device_type: str) -> bool:
    """Whether the device computes bfloat16 natively (CPU: AVX512-BF16 or AMX; CUDA: compute capability >= 8)."""
    if device_type == "cuda":
        return torch.cuda.is_bf16_supported()
    cpu = getattr(torch, "cpu", None)
    checks = [getattr(cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(check() for check in checks if check is not None)


def autocast_criterion(criterion, model, enabled: bool, optimizer=None):
    """`criterion`, or a wrapper that calls it under bf16 autocast on the model's device, when `enabled`. Refused
    with half-precision weights (--fp16, --bf16) and with --amp (fairseq wraps the optimizer for its fp16
    autocast and loss scaler), whose own mixed precision this would nest inside."""
    if not enabled:
        return criterion
    from fairseq.optim.amp_optimizer import AMPOptimizer

    from fairseq_compgen.errors import UsageError

    weights = next(model.parameters())
    if weights.dtype != torch.float32:
        raise UsageError(f"--autocast-bf16 needs float32 weights, but the model's are {weights.dtype}: leave out "
                         f"--fp16 / --bf16 / --memory-efficient-fp16 / --memory-efficient-bf16")
    if isinstance(optimizer, AMPOptimizer):
        raise UsageError("--autocast-bf16 and --amp are two mixed precisions (bf16 autocast; fairseq's CUDA fp16 "
                         "autocast with a loss scaler): leave out one of them")
    device_type = weights.device.type
    if device_type not in _warned and not hardware_bf16(device_type):
        _warned.add(device_type)
        logger.warning("--autocast-bf16: this %s has no native bfloat16 arithmetic (AVX512-BF16/AMX or compute "
                       "capability 8); training is correct but may be slower than float32", device_type)
    return _AutocastCriterion(criterion, device_type)
