"""Adding a position encoding is one file (issue 24 item 4): a toy encoding in a user's `--user-dir` plugin, outside
the package, is picked up by the registry, appears among the flag choices with its option, and trains."""
import argparse
import textwrap

import torch

from model_helpers import build_task, first_batch

PLUGIN = textwrap.dedent('''
    """A toy position encoding: a learned Gaussian bias on distance, -(j - i)^2 / width_h^2, one width per head."""
    import torch
    import fairseq_compgen  # noqa: F401  (registers the model and its flags with fairseq)
    from fairseq_compgen.modules.positions import (AttentionPosition, DECODER_SELF, ENCODER_SELF, Option,
                                                   register_position)

    WIDTH = Option("toy_width", "width", float, 1.0, "initial width of the toy Gaussian bias")

    @register_position("toy_gauss", sites=(ENCODER_SELF, DECODER_SELF), paper="Nobody 2026",
                       help="a learned Gaussian bias on distance", options=(WIDTH,))
    class ToyGauss(AttentionPosition):
        def __init__(self, embed_dim, num_heads, causal, width=1.0):
            super().__init__()
            self.width = torch.nn.Parameter(torch.full((num_heads,), float(width)))  # [H]

        def bias(self, q, q_pos, k_pos, scale, k=None):
            d = (k_pos[None, :] - q_pos[:, None]).to(q.dtype)  # [Tq, Tk]
            return -(d ** 2) / self.width[:, None, None] ** 2  # [H, Tq, Tk]
''')


def test_an_encoding_from_a_user_dir_plugin_is_a_flag_choice_and_trains(scan_bin, tmp_path):
    plugin = tmp_path / "toy_positions_plugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text(PLUGIN)
    task, model, criterion = build_task(scan_bin, "rope_transformer_scan", extra=[
        "--user-dir", str(plugin), "--encoder-self-attn-pos", "toy_gauss", "--toy-width", "3"])
    from fairseq_compgen.models.compgen_transformer import CompgenTransformerModel

    parser = argparse.ArgumentParser()
    CompgenTransformerModel.add_args(parser)
    actions = {a.dest: a for a in parser._actions}
    assert "toy_gauss" in actions["self_attn_pos"].choices and "toy_width" in actions
    assert "Nobody 2026" in actions["self_attn_pos"].help

    enc_scorer = model.encoder.stack.layers[0].self_attn.scorer
    dec_scorer = model.decoder.stack.layers[0].self_attn.scorer
    assert type(enc_scorer).__name__ == "ToyGauss" and type(dec_scorer).__name__ == "RotaryPositions"
    assert torch.equal(enc_scorer.width, torch.full((8,), 3.0))  # --toy-width reached the module
    before = enc_scorer.width.detach().clone()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss, _, _ = criterion(model, first_batch(task, "train"))
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss) and not torch.equal(enc_scorer.width.detach(), before)  # one update moved it
