"""Experiment pipelines: sweeps over configurations x seeds x datasets (:mod:`.sweep`) and paper-style tables and
plots from their results (:mod:`.aggregate`). Each run is `fairseq-compgen train` (fairseq-train with a recipe,
:mod:`.train`) and `fairseq-compgen eval` (greedy decoding and scoring, :mod:`.evaluate`); every run folder's
command.txt is a plain fairseq-train command that can be rerun by hand. :mod:`.submit` sends the runs to Slurm
through submitit."""
