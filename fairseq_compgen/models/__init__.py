"""Models and their registered architectures (`--arch`)."""
from fairseq_compgen.models import compgen_transformer  # noqa: F401  (registers the model)
from fairseq_compgen.models import archs  # noqa: F401,I001  (registers its presets; must come second)
from fairseq_compgen.models import archs_chaabouni  # noqa: F401,I001  (Chaabouni et al. 2021 presets)
