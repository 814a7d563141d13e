"""Whole-model parameter initialisation schemes (`--param-init`), applied once after a model is built.

Each module initialises its own parameters as Csordás et al.'s code does (`default`: Xavier-uniform projections,
see each module's docstring). Two papers say they used another framework's defaults, and that these matter:

* `keras` -- Ontañón, Ainslie, Cvicek, Fisher (2022), App. A (and the authors' code): the TensorFlow Transformer
  tutorial, whose Keras `Dense` layers are Glorot-uniform (limit sqrt(6 / (fan_in + fan_out)), no ReLU gain) with
  zero biases and whose LayerNorms use epsilon 1e-6. "A Flax re-implementation with different defaults [...] could
  not reproduce some results until these details were made to match Keras."  Every `nn.Linear` of the model
  (attention, feed-forward, copy decoder, tagger heads) is re-initialised so, every `nn.LayerNorm` gets eps 1e-6.
  The decoder's separate output projection is already Glorot-uniform with a zero bias. The embedding side
  (U[-0.05, 0.05], times sqrt(d)) is `--embedding-scaling keras` (modules/embedding.py); the relative tables are
  U[-0.05, 0.05] by themselves (modules/positions/relative_ontanon.py).
* `fairseq` -- Chaabouni, Dessì, Kharitonov (2021) §3: "fairseq's Transformer with its initialization and default
  parameters", i.e. fairseq's `MultiheadAttention.reset_parameters` (Q, K, V Xavier-uniform with gain 1/sqrt(2)
  when queries, keys and values have one size, else gain 1; their biases PyTorch's default; the output projection
  Xavier-uniform with a zero bias), feed-forward layers at PyTorch's `nn.Linear` default (Kaiming-uniform,
  a = sqrt(5)), and an untied output projection N(0, d^-1/2). LayerNorm eps stays 1e-5. fairseq's output
  projection has no bias; ours keeps its learned output bias, initialised to zero (the same function at init).
  The embedding side (N(0, d^-1/2), times sqrt(d), fairseq's sinusoid layout and offset) is
  `--embedding-scaling fairseq`.

Scorers, gates and other paper-specific parameters keep their own initialisation under every scheme.
"""
import math

import torch.nn as nn

from fairseq_compgen.errors import UsageError
from fairseq_compgen.modules.attention import MultiheadAttention
from fairseq_compgen.modules.layers import FeedForward

PARAM_INITS = ("default", "keras", "fairseq")

KERAS_LAYERNORM_EPS = 1e-6  # tf.keras.layers.LayerNormalization(epsilon=1e-6) in the TF Transformer tutorial


def _keras(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            m.eps = KERAS_LAYERNORM_EPS


def _fairseq(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, MultiheadAttention):
            same_dim = m.k_proj.in_features == m.q_proj.in_features  # fairseq's qkv_same_dim
            for lin in (m.q_proj, m.k_proj, m.v_proj):
                lin.reset_parameters()  # PyTorch's default bias (fairseq leaves the Q/K/V biases at it)
                nn.init.xavier_uniform_(lin.weight, gain=1 / math.sqrt(2) if same_dim else 1.0)
            nn.init.xavier_uniform_(m.out_proj.weight)
            if m.out_proj.bias is not None:
                nn.init.zeros_(m.out_proj.bias)
        elif isinstance(m, FeedForward):
            m.fc1.reset_parameters()
            m.fc2.reset_parameters()
        weight = getattr(m, "output_weight", None)  # CompgenDecoder's untied output projection [V, d]
        if isinstance(weight, nn.Parameter):
            nn.init.normal_(weight, 0.0, weight.size(1) ** -0.5)


def apply_param_init(model: nn.Module, scheme: str) -> nn.Module:
    """Re-initialise `model` in place by `scheme` (one of PARAM_INITS); returns it."""
    if scheme not in PARAM_INITS:
        raise UsageError(f"--param-init must be one of {PARAM_INITS}, got {scheme!r}")
    if scheme == "keras":
        _keras(model)
    elif scheme == "fairseq":
        _fairseq(model)
    return model
