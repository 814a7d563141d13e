"""Work that a Universal Transformer's shared layer would repeat at every depth, done once per forward pass.

Csordás et al. (2021, §2.2) apply one layer at every depth (modules/layer_stack.py). In one pass of the decoder,
that layer's cross-attention projects the same encoder output with the same weights at every depth:
K = X_enc W_K and V = X_enc W_V (Linear attention: K̂, V and Σ K̂ Vᵀ) are the same tensors each time. A `DepthMemo`
lives for one forward pass of one stack (`LayerStack.depth_memo()`); a module asks it for a value that depends only
on its weights and that pass's inputs, and the value is computed at the first depth and reused at the others.

Outputs are bitwise those of computing it at every depth. In backward, autograd adds the depths' gradients of the
memoized tensor and then runs one backward of the computation, where it ran one per depth and added the results:
the same sum in another order, so the gradients of W_K, W_V and of the encoder output can differ in the last bits.
"""
from typing import Any, Callable, Dict, Hashable, Optional, Tuple, TypeVar

T = TypeVar("T")


class DepthMemo:
    """Values computed once per forward pass, keyed by (module, name, inputs); lives no longer than the pass."""

    def __init__(self):
        self._values: Dict[Tuple[Hashable, ...], Any] = {}

    def get(self, key: Tuple[Hashable, ...], compute: Callable[[], T]) -> T:
        if key not in self._values:
            self._values[key] = compute()
        return self._values[key]


def once_per_pass(memo: Optional[DepthMemo], key: Tuple[Hashable, ...], compute: Callable[[], T]) -> T:
    """compute(), or the value memo already holds under key (modules and tensors in the key compare by identity)."""
    return compute() if memo is None else memo.get(key, compute)
