"""Telemetry through fairseq's own flags: `--tensorboard-logdir` writes TensorBoard event files (tensorboardX is
installed by scripts/setup.sh; fairseq only warned that it was missing before) with our metrics in them."""
import os
import random
import struct
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def scalar_tags(path: Path) -> set:
    """The scalar tags of a TensorBoard event file (TFRecord framing: length, its CRC, the Event, its CRC)."""
    from tensorboardX.proto import event_pb2

    data, i, tags = path.read_bytes(), 0, set()
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i:i + 8])
        event = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
        tags.update(v.tag for v in event.summary.value)
        i += 12 + n + 4
    return tags


def test_tensorboard_logdir_records_train_and_validation_metrics(tmp_path):
    from fairseq_compgen.data.binarize import prepare_split
    from fairseq_compgen.data.scan import build_split

    data = build_split("length_cutoff_26")
    rng = random.Random(0)
    prepare_split("tiny SCAN", tmp_path / "tiny", {"train": rng.sample(data["train"], 64), "valid": data["valid"][:16]},
                  dict_from="all")
    tb = tmp_path / "tb"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([BIN / "fairseq-train", tmp_path / "tiny" / "bin", "--user-dir", REPO / "fairseq_compgen",
                        "--task", "compgen", "--arch", "rel_uni_transformer_scan", "--encoder-layers", "1",
                        "--decoder-layers", "1", "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
                        "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32", "--optimizer", "adam",
                        "--lr", "1e-3", "--batch-size", "16", "--max-update", "4", "--cpu", "--num-workers", "0",
                        "--save-dir", tmp_path / "run", "--tensorboard-logdir", tb, "--log-interval", "1"],
                       cwd=REPO, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Please install tensorboardX" not in p.stderr + p.stdout
    events = {f.parent.name: f for f in tb.rglob("events.out.tfevents.*")}
    assert {"train", "valid"} <= set(events), events
    assert "accuracy" in scalar_tags(events["valid"]) and "loss" in scalar_tags(events["train"])
