"""A stack of N layers, or one layer applied N times: the Universal Transformer of Dehghani et al. (2019)
as Csordás et al. (2021, §2.2 and §4.2) use it: shared weights, no ACT, no timestep embedding.

Iterating yields (depth, layer); callers pass `depth` down so per-depth decoding caches stay apart.
"""
from typing import Callable, Iterator, Optional, Tuple

import torch.nn as nn

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.depth_memo import DepthMemo


class LayerStack(nn.Module):
    def __init__(self, make_layer: Callable[[], nn.Module], num_layers: int, universal: bool):
        super().__init__()
        if num_layers < 1:
            raise UsageError(f"a layer stack needs at least one layer, got {num_layers}")
        self.num_layers, self.universal = num_layers, universal
        self.layers = nn.ModuleList([make_layer() for _ in range(1 if universal else num_layers)])

    def __iter__(self) -> Iterator[Tuple[int, nn.Module]]:
        for depth in range(self.num_layers):
            yield depth, self.layers[0 if self.universal else depth]

    def depth_memo(self) -> Optional[DepthMemo]:
        """A memo for one forward pass if the layer is shared (work repeated across depths, modules/depth_memo.py),
        else None: separate layers have separate weights, so nothing repeats."""
        return DepthMemo() if self.universal else None
