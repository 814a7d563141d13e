"""Models and their registered architectures (`--arch`). Models register before the preset files that use them."""
from fairseq_compgen.models import compgen_transformer  # noqa: F401  (the composable encoder-decoder)
from fairseq_compgen.models import tagger  # noqa: F401,I001  (Ontañón et al. 2022 §4.5.1: encoder-only tagger)
from fairseq_compgen.models import syntactic_attention  # noqa: F401,I001  (Russin et al. 2019)
from fairseq_compgen.models import archs  # noqa: F401,I001  (Csordás et al. 2021 presets)
from fairseq_compgen.models import archs_chaabouni  # noqa: F401,I001  (Chaabouni et al. 2021 presets)
from fairseq_compgen.models import archs_ontanon  # noqa: F401,I001  (Ontañón et al. 2022 presets)
from fairseq_compgen.models import archs_park_kim  # noqa: F401,I001  (Park & Kim 2024 presets)
from fairseq_compgen.models import archs_positions  # noqa: F401,I001  (position-encoding presets, modules/positions/)
