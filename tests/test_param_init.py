"""`--param-init` and the framework embeddings, against the frameworks the papers used.

fairseq (Chaabouni et al. 2021 §3) is installed, so the Chaabouni presets are checked against fairseq's own
`transformer`: its embedding and sinusoids numerically, its initialisation tensor by tensor, and the whole forward
pass with the weights copied across. Keras (Ontañón et al. 2022 App. A) is not, so its defaults are written out:
Glorot-uniform dense kernels (limit sqrt(6 / (fan_in + fan_out))), zero biases, LayerNorm epsilon 1e-6.
"""
import math
import re
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn
from fairseq.modules import SinusoidalPositionalEmbedding

from fairseq_compgen.models.tagger import TAG_FIELDS, CompgenTaggerModel
from fairseq_compgen.modules.param_init import apply_param_init
from fairseq_compgen.modules.positions import TokenEmbedding
from model_helpers import build, make_dictionary

PAD = 1


def test_fairseq_embedding_equals_fairseqs_modules():
    """sqrt(d) E[w] + fairseq's SinusoidalPositionalEmbedding, on a left-padded batch and step by step."""
    torch.manual_seed(0)
    d = 16
    ours = TokenEmbedding(30, d, PAD, "fairseq", dropout=0.0, positions=True)
    theirs = SinusoidalPositionalEmbedding(d, PAD, init_size=64)
    tokens = torch.tensor([[PAD, PAD, 5, 6, 7, 8], [4, 9, 10, 11, 12, 13]])
    expected = math.sqrt(d) * ours.weight[tokens] + theirs(tokens)
    keep = tokens.ne(PAD)
    assert torch.allclose(ours(tokens)[keep], expected[keep], atol=1e-5)
    for t in range(tokens.size(1)):  # the decoder's incremental path: one token at position `start`
        step = ours(tokens[1:, t:t + 1], start=t)
        assert torch.allclose(step, expected[1:, t:t + 1], atol=1e-5)
    w = ours.weight
    assert w[PAD].abs().sum() == 0
    big = TokenEmbedding(2000, d, PAD, "fairseq", dropout=0.0).weight
    assert big.std().item() == pytest.approx(d ** -0.5, rel=0.05)  # fairseq's Embedding: N(0, d^-1/2)


def test_fairseq_embedding_without_positions_is_scaled():
    emb = TokenEmbedding(30, 16, PAD, "fairseq", dropout=0.0, positions=False)
    tokens = torch.tensor([[5, 6]])
    assert torch.allclose(emb(tokens), 4.0 * emb.weight[tokens])


def _fairseq_name(name: str) -> str:
    """Our parameter name -> fairseq transformer's (post-LN layers, untied output projection)."""
    for ours, theirs in (("embed.embed.weight", "embed_tokens.weight"), ("stack.layers.", "layers."),
                         ("ffn.fc", "fc"), ("cross_attn.", "encoder_attn."), ("attn_block.norm", "self_attn_layer_norm"),
                         ("self_block.norm", "self_attn_layer_norm"), ("cross_block.norm", "encoder_attn_layer_norm"),
                         ("ffn_block.norm", "final_layer_norm"), ("decoder.output_weight", "decoder.output_projection.weight")):
        name = name.replace(ours, theirs)
    return name


def _pair(layers=2, **size):
    size = {**dict(encoder_embed_dim=64, decoder_embed_dim=64, encoder_ffn_embed_dim=128, decoder_ffn_embed_dim=128,
                   encoder_attention_heads=4, decoder_attention_heads=4), **size}
    ours = build("chaabouni_transformer", src_words=40, tgt_words=30, encoder_layers=layers, decoder_layers=layers,
                 **size)
    theirs = build("transformer", src_words=40, tgt_words=30, encoder_layers=layers, decoder_layers=layers, **size)
    return ours, theirs


def test_chaabouni_preset_computes_fairseqs_transformer():
    """With fairseq's weights copied in, the preset's log-probabilities equal fairseq's `transformer`'s."""
    torch.manual_seed(0)
    ours, theirs = _pair()
    target = dict(theirs.named_parameters())
    with torch.no_grad():
        for name, p in ours.named_parameters():
            if name == "decoder.output_bias":
                assert p.abs().sum() == 0  # fairseq's output projection has no bias
                continue
            p.copy_(target.pop(_fairseq_name(name)))
    assert not target, f"fairseq parameters without a counterpart: {sorted(target)}"
    ours.eval(), theirs.eval()
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 44, (3, 7), generator=g)
    src[0, :2] = PAD  # fairseq left-pads sources
    prev = torch.randint(4, 34, (3, 5), generator=g)
    prev[:, 0] = 2
    lengths = src.ne(PAD).sum(1)
    with torch.no_grad():
        a = ours.get_normalized_probs(ours(src, lengths, prev), log_probs=True)
        b = theirs.get_normalized_probs(theirs(src, lengths, prev), log_probs=True)
    assert torch.allclose(a, b, atol=1e-4), (a - b).abs().max()


def test_chaabouni_preset_initialises_like_fairseq():
    """Every tensor's spread (and zero biases) as fairseq's `transformer` initialises the same tensor."""
    torch.manual_seed(0)
    ours, theirs = _pair(layers=2, encoder_embed_dim=256, decoder_embed_dim=256, encoder_ffn_embed_dim=512,
                         decoder_ffn_embed_dim=512)
    target = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        if name == "decoder.output_bias":
            continue
        q = target[_fairseq_name(name)]
        if re.search(r"norm\.(weight|bias)$", name):
            assert torch.equal(p, q)
        elif p.abs().sum() == 0 or q.abs().sum() == 0:
            assert torch.equal(p, q), name  # zero in both (out_proj biases)
        else:
            # two draws of one distribution: their stds differ by a few standard errors (about 1/sqrt(2n) relative)
            assert p.std().item() == pytest.approx(q.std().item(), rel=0.02 + 4 / math.sqrt(2 * p.numel())), name
            # the same support: uniform inits reach their bound, so the largest values agree too
            assert p.abs().max().item() == pytest.approx(q.abs().max().item(), rel=0.3), name
    for m in ours.modules():
        if isinstance(m, nn.LayerNorm):
            assert m.eps == 1e-5


def _keras_linear_ok(lin: nn.Linear):
    limit = math.sqrt(6.0 / (lin.in_features + lin.out_features))
    assert lin.weight.abs().max().item() <= limit
    if lin.weight.numel() >= 4096:  # U[-limit, limit] has variance limit^2 / 3 (the ReLU gain would double it)
        assert lin.weight.var().item() == pytest.approx(limit ** 2 / 3, rel=0.1)
    assert lin.bias is None or lin.bias.abs().sum() == 0


@pytest.mark.parametrize("arch", ["ontanon_abs", "ontanon_rel_eb", "ontanon_rel2_eb_c", "ontanon_small_2s"])
def test_ontanon_presets_initialise_as_keras(arch):
    torch.manual_seed(0)
    model = build(arch, src_words=60, tgt_words=60)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert len(linears) >= 8
    for lin in linears:
        _keras_linear_ok(lin)
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert norms and all(m.eps == 1e-6 for m in norms)
    for embed in (model.encoder.embed, model.decoder.embed):  # U[-0.05, 0.05] times sqrt(d), rel-* models too
        assert embed.token_scale == math.sqrt(64) and embed.weight.abs().max().item() <= 0.05
    limit = math.sqrt(6.0 / sum(model.decoder.output_weight.shape))
    assert model.decoder.output_weight.abs().max().item() <= limit and model.decoder.output_bias.abs().sum() == 0


def test_ontanon_tagging_presets_initialise_as_keras():
    """The tagger's heads (Keras Dense layers in the authors' notebook) are Glorot-uniform with zero biases too."""
    from fairseq.models import ARCH_CONFIG_REGISTRY
    import argparse

    torch.manual_seed(0)
    task = SimpleNamespace(source_dictionary=make_dictionary(50), max_sentence_length=20,
                           tag_dictionaries={f: make_dictionary(7) for f in TAG_FIELDS})
    for arch in ("ontanon_tagging_abs_small_2_absolute", "ontanon_tagging_rel_eb_small_2s_attention"):
        args = argparse.Namespace()
        ARCH_CONFIG_REGISTRY[arch](args)
        model = CompgenTaggerModel.build_model(args, task)
        for lin in (m for m in model.modules() if isinstance(m, nn.Linear)):
            _keras_linear_ok(lin)
        assert all(m.eps == 1e-6 for m in model.modules() if isinstance(m, nn.LayerNorm))


def test_default_scheme_changes_nothing_and_bad_scheme_is_refused():
    torch.manual_seed(0)
    model = build("rel_uni_transformer_scan")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    apply_param_init(model, "default")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match="--param-init must be one of"):
        apply_param_init(model, "xavier")
