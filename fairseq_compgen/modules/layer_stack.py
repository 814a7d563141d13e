"""A stack of N layers, or one layer applied N times: the Universal Transformer of Dehghani et al. (2019)
as Csordás et al. (2021, §2.2 and §4.2) use it: shared weights, no ACT, no timestep embedding.

Iterating yields (depth, layer); callers pass `depth` down so per-depth decoding caches stay apart.
"""
from typing import Callable, Iterator, Tuple

import torch.nn as nn

from fairseq_compgen.errors import UsageError


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
