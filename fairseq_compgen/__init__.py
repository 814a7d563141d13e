"""fairseq_compgen: Transformer variants, benchmarks and evaluation for compositional generalization.

Use as a fairseq plugin: `fairseq-train --user-dir fairseq_compgen --task compgen --arch rel_uni_transformer ...`.
Importing the package registers its models, architectures and tasks with fairseq.
"""
import os

# fairseq checkpoints pickle argparse Namespaces and omegaconf configs; torch >= 2.6 refuses them under its
# default torch.load(weights_only=True), which breaks fairseq-generate and resuming (fairseq-host.md, trap 2).
# fairseq loads only checkpoints the user points it at, so restore the pre-2.6 default unless the user set it.
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

from fairseq_compgen import criterions, models, modules, tasks  # noqa: E402,F401
from fairseq_compgen.errors import install_excepthook  # noqa: E402

install_excepthook()  # uncaught UsageErrors print as one line (errors.py)

__version__ = "0.1.0"
