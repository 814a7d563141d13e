"""Experiment pipelines: sweeps over configurations x seeds x datasets (:mod:`.sweep`) and paper-style tables and
plots from their results (:mod:`.aggregate`). They drive fairseq through the shell wrappers in ``scripts/``
(train.sh, evaluate.sh): every run is a plain fairseq-train / fairseq-generate command that can be rerun by hand."""
