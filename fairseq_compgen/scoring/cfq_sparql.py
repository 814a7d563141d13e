"""Exact match of CFQ-im outputs on the SPARQL they stand for.

    Santiago Ontañón, Joshua Ainslie, Vaclav Cvicek, Zachary Fisher. 2022. "Making Transformers Solve
    Compositional Tasks". ACL 2022, Section 4.5.2 (CFQ-im, following Herzig et al. 2021).

A model trained on CFQ-im targets (`fairseq-compgen prep cfq --intermediate`) writes queries whose triples are
grouped; the paper scores the SPARQL they stand for. Both the T- and the H- lines are restored
(`data/cfq_im.py:from_im`: every group expanded into its Cartesian product, the clauses sorted, as CFQ writes
them), then scored as :mod:`fairseq_compgen.scoring.exact_match` scores text. So a hypothesis whose clauses are a
permutation of the reference's is right, as in the released code's equivalence check (duplicates kept), where
comparing the CFQ-im strings themselves would call it wrong. A hypothesis that is not well-formed CFQ-im is scored
as it is (it cannot match) and counted (`malformed_hypotheses`).

    python -m fairseq_compgen.scoring.cfq_sparql GENERATE_LOG [--expected-count N] [--json OUT.json]

`fairseq-compgen eval` uses it on a CFQ-im folder by default (its prep declares it in DATA/dataset.json).
"""

from __future__ import annotations

import argparse
import io
from typing import Optional, Sequence

from fairseq_compgen.scoring import Scorer, read_generate_output, register
from fairseq_compgen.scoring.exact_match import format_table, run_cli, score_generate_output, write_json


def main(argv: Optional[Sequence[str]] = None) -> dict:
    from fairseq_compgen.data.cfq_im import restore_log

    p = argparse.ArgumentParser(description="Exact match of CFQ-im fairseq-generate output on the restored SPARQL.")
    p.add_argument("generate_log", help="fairseq-generate output of a CFQ-im model (or a run's "
                                        "eval/SUBSET.outputs.gz); '-' for stdin")
    p.add_argument("--expected-count", type=int, help="fail unless exactly this many examples are scored")
    p.add_argument("--json", dest="json_out", help="write the result as JSON here (atomically)")
    args = p.parse_args(argv)
    lines, source = read_generate_output(args.generate_log)
    restored = io.StringIO()
    _, malformed = restore_log(lines, restored, source)  # a reference that is not CFQ-im: DataError, file:line
    result = score_generate_output(restored.getvalue().splitlines(), None, args.expected_count, source=source)
    result["malformed_hypotheses"] = malformed
    print(format_table(result))
    print(f"scored on the restored SPARQL; {malformed} hypothesis(es) not well-formed CFQ-im, scored as written")
    if args.json_out:
        write_json(args.json_out, result)
    return result


register(Scorer(
    name="cfq_sparql", key="accuracy", label="exact match of the restored SPARQL",
    paper="Ontañón, Ainslie, Cvicek & Fisher (2022), ACL, Section 4.5.2",
    help="exact match of CFQ-im outputs on the SPARQL they stand for (clause order within a query ignored)",
    main=main, eval_argv=lambda generated, data, subset, n: [str(generated), "--expected-count", str(n)],
))

if __name__ == "__main__":
    run_cli(main)
