"""Adding a position encoding is one file, used exactly as docs/models.md ("Add your own position encoding") tells:
a toy encoding in a `--user-dir` plugin outside the package that imports fairseq_compgen, then `--self-attn-pos
toy_gauss --toy-width 3` on a preset. A real fairseq-train run with it (3 updates of a tiny model on CPU, one
thread) must accept the flag and its option, train the encoding's parameter in both stacks with a finite loss, and
its checkpoint must decode with fairseq-generate given the same plugin, and with `fairseq-compgen eval --user-dir`
(refused in one line without it), and `fairseq-compgen help --user-dir` must list it."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # fairseq-train, fairseq-generate
TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
        "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2").split()

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


def _run(program, *args):
    """A fairseq command as a user runs it, with this checkout's package; its stdout and stderr."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])  # not an installed copy of the package
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path)
    p = subprocess.run([str(BIN / program), *map(str, args)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{program} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout + p.stderr


def test_an_encoding_from_a_user_dir_plugin_trains_and_decodes(scan_bin, tmp_path):
    from fairseq_compgen.checkpoint_loading import load

    plugin = tmp_path / "toy_positions_plugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text(PLUGIN)
    save = tmp_path / "run"
    flags = ["--user-dir", plugin, "--task", "compgen", "--cpu"]
    log = _run("fairseq-train", scan_bin, *flags, "--arch", "rope_transformer_scan", "--self-attn-pos", "toy_gauss",
               "--toy-width", "3", *TINY, "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "16",
               "--max-update", "3", "--disable-validation", "--num-workers", "0", "--log-format", "json",
               "--log-interval", "1", "--save-dir", save, "--no-epoch-checkpoints", "--seed", "1")
    losses = [float(json.loads(line[line.index("{"):])["loss"]) for line in log.splitlines()
              if '"loss"' in line and "{" in line]
    assert len(losses) >= 3 and all(torch.isfinite(torch.tensor(losses))), log[-3000:]

    ckpt = load(save / "checkpoint_last.pt")
    model_args = ckpt["cfg"]["model"]  # an argparse Namespace (fairseq's legacy models)
    assert (model_args.self_attn_pos, model_args.toy_width) == ("toy_gauss", 3.0)
    assert ckpt["optimizer_history"][-1]["num_updates"] == 3
    for stack in ("encoder", "decoder"):  # the toy encoding in both stacks, started at --toy-width, then trained
        width = ckpt["model"][f"{stack}.stack.layers.0.self_attn.scorer.width"]  # [H]
        assert width.shape == (2,) and (width - 3.0).abs().max() < 0.1 and bool((width != 3.0).all())

    out = _run("fairseq-generate", scan_bin, *flags, "--path", save / "checkpoint_last.pt", "--gen-subset", "gen",
               "--beam", "1", "--batch-size", "32")
    hypotheses = [line for line in out.splitlines() if line.startswith("H-")]
    assert len(hypotheses) == len((scan_bin.parent / "gen.src").read_text().splitlines()) == 24

    # fairseq-compgen eval loads the model without fairseq's parser: the plugin comes with --user-dir (a sweep passes
    # its runs' own, sweep.user_dir); without it, one line that says so
    from fairseq_compgen.pipelines.sweep import user_dir

    assert user_dir(["--max-update", "3", "--user-dir", str(plugin)]) == ["--user-dir", str(plugin)]
    assert user_dir([f"--user-dir={plugin}"]) == ["--user-dir", str(plugin)] and user_dir(["--seed", "1"]) == []
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    compgen = [sys.executable, "-m", "fairseq_compgen.cli"]
    refused = subprocess.run([*compgen, "eval", save / "checkpoint_last.pt", scan_bin, "gen", "--cpu"], env=env,
                             capture_output=True, text=True, timeout=600)
    said = refused.stderr.strip().splitlines()  # fairseq's log lines, then the error: one line, no traceback
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "unknown position encoding 'toy_gauss'" in said[-1] and "pass its folder with --user-dir" in said[-1]
    scored = subprocess.run([*compgen, "eval", save / "checkpoint_last.pt", scan_bin, "gen", "--cpu", "--user-dir",
                             plugin], env=env, capture_output=True, text=True, timeout=600)
    assert scored.returncode == 0, scored.stderr[-3000:]
    assert json.loads((save / "eval" / "gen.json").read_text())["n"] == 24
    listed = subprocess.run([*compgen, "help", "--user-dir", plugin], env=env, capture_output=True, text=True,
                            timeout=600)
    assert listed.returncode == 0 and "toy_gauss" in listed.stdout and "Nobody 2026" in listed.stdout
    plain = subprocess.run([*compgen, "help"], env=env, capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0 and "alibi" in plain.stdout and "toy_gauss" not in plain.stdout
    assert user_dir(["--user-dir", "a", "--user-dir=b"]) == ["--user-dir", "b"]  # the last, as fairseq reads them


def test_a_plugin_folder_that_cannot_be_imported_is_one_line(tmp_path):
    """A --user-dir folder named like a module already imported (fairseq refuses it as "not globally unique"), or
    one without an __init__.py, is a UsageError naming the folder, not a traceback."""
    import pytest

    import fairseq_compgen
    from fairseq_compgen.errors import UsageError

    clash = tmp_path / "json"
    clash.mkdir()
    (clash / "__init__.py").write_text("")
    with pytest.raises(UsageError, match=r"--user-dir .*json: the plugin could not be imported: .*not globally unique"):
        fairseq_compgen.import_user_dir(str(clash))
    with pytest.raises(UsageError, match=r"--user-dir .*empty: expected a plugin folder with an __init__.py"):
        fairseq_compgen.import_user_dir(str(tmp_path / "empty"))
