"""Softmax over the last dimension that avoids PyTorch's slow CPU kernel for rows shorter than one SIMD vector.

The same function as ``torch.softmax(x, dim=-1)``: p_j = exp(x_j - max_i x_i) / sum_k exp(x_k - max_i x_i), and its
gradient dL/dx = p * (g - sum_j g_j p_j) for the incoming gradient g; a row whose entries are all -inf gives NaN,
as torch.softmax does. Only the kernels differ. On CPU, ATen's last-dimension softmax and its backward are several
times slower per row when the row is shorter than one vector register (64 bytes with AVX-512: 16 float32 or 32
bfloat16) than when it fills one or more: measured with torch 2.13 on the AVX-512 Xeon of docs/results.md, one
thread (`benchmarks/softmax.py`, results/softmax_cpu.json), forward + backward over rows of 4-15 float32 took
3.1-4.1x as long with torch.softmax as with the elementwise and reduction kernels below, and over rows of 4-28
bfloat16 1.6-2.5x, while over rows of 16 float32 or 32 bfloat16 and longer torch.softmax was 1.4-3x faster than
they are. Attention over SCAN's commands (at most 10 tokens with EOS) and over short targets is that slow case, so
`softmax` takes the composite for those rows only and torch.softmax otherwise. With AVX2 the same rule is applied
to its 32-byte registers (not measured here); on other devices and CPUs it is torch.softmax.

The result equals torch.softmax's to rounding (float32: within a few ulp), not bitwise. A bfloat16/float16 x is
computed in float32 and rounded back, as ATen's CPU kernel does; float64 stays float64.
"""
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

# bytes per vector register of the CPU kernels PyTorch dispatches to (torch.backends.cpu.get_cpu_capability()); rows
# of fewer bytes take the composite. Other capabilities (DEFAULT, ZVECTOR, ...) were not measured: torch.softmax.
_REGISTER_BYTES = {"AVX512": 64, "AVX2": 32}
_CPU_REGISTER = None  # looked up on first use


def _cpu_register() -> int:
    global _CPU_REGISTER
    if _CPU_REGISTER is None:
        _CPU_REGISTER = _REGISTER_BYTES.get(torch.backends.cpu.get_cpu_capability(), 0)
    return _CPU_REGISTER


class _ShortRowSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        xf = x if x.dtype in (torch.float32, torch.float64) else x.float()  # [..., K]
        e = (xf - xf.amax(dim=-1, keepdim=True)).exp_()  # [..., K], exp(x - row max)
        p = e.div_(e.sum(dim=-1, keepdim=True))  # [..., K]
        ctx.save_for_backward(p)
        return p.to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> Tensor:
        (p,) = ctx.saved_tensors  # [..., K], float32 for a reduced-precision x
        g = grad.to(p.dtype)
        return (p * (g - (g * p).sum(dim=-1, keepdim=True))).to(grad.dtype)


def softmax(x: Tensor) -> Tensor:
    """softmax over x's last dimension: x [..., K] -> [..., K], same dtype."""
    if x.device.type == "cpu" and x.size(-1) * x.element_size() < _cpu_register():
        return _ShortRowSoftmax.apply(x)
    return torch.softmax(x, dim=-1)
