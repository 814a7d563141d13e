"""Is one configuration's gap over another larger than its seeds' spread? The papers' claims are comparisons (Rel.
Uni. over Trafo, LT + L2 + orth over LT, SAG + T5 over the Transformer), and a table of means ± std does not say
whether five seeds can tell two cells apart. This gives, per dataset and subset, the difference of the two means
and the p-value of a two-sided permutation test over seeds (Fisher's randomization test of the difference of
means): under "the configuration makes no difference", every split of the pooled seed values into groups of the
two sizes is as likely as the observed one, and p is the share of splits whose difference of means is at least as
far from 0 as the observed one. Exact (every split) up to EXACT_LIMIT splits, else a Monte Carlo estimate from a
fixed generator (said beside the value). With 5 seeds against 5 there are 252 splits, so the smallest possible p
is 2/252 = 0.008; with 3 against 3, 2/20 = 0.1: three seeds cannot reach p < 0.05.

    fairseq-compgen aggregate runs/csordas_table3 --compare trafo rel_uni_trafo    # OUT/compare_trafo_rel_uni_trafo.md

Written here rather than taken from scipy.stats.permutation_test (scipy 1.17, which fairseq's dependencies bring):
its two-sided p is twice the smaller one-sided p, not the share of splits at least as far from 0, and the two
differ when the groups' sizes differ (3 seeds against 5: 0.571 against this test's 0.536 for [0.1, 0.2, 0.3, 0.4,
0.9] against [0.6, 0.8, 0.2]); and it refuses a group of one seed, which a campaign's first seed against the
five of another sweep is (aggregate --against).

(the table: tables.comparison_table)
"""
import itertools
import math
import random
from typing import Sequence, Tuple

EXACT_LIMIT = 200_000  # splits enumerated exactly; beyond, MONTE_CARLO random splits
MONTE_CARLO = 100_000


def permutation_p(a: Sequence[float], b: Sequence[float]) -> Tuple[float, bool]:
    """(two-sided p of mean(b) - mean(a) under random relabelling of the pooled values, exact?) for groups of at
    least one value each."""
    if not a or not b:
        raise ValueError("permutation_p needs at least one value in each group")
    pooled, na = list(a) + list(b), len(a)
    total = sum(pooled)
    observed = abs(sum(b) / len(b) - sum(a) / na)
    tolerance = 1e-12 * max(1.0, observed)  # the observed split itself must count, whatever the rounding

    def extreme(group_a_sum: float) -> bool:
        return abs((total - group_a_sum) / len(b) - group_a_sum / na) >= observed - tolerance

    splits = math.comb(len(pooled), na)
    if splits <= EXACT_LIMIT:
        return sum(extreme(sum(group)) for group in itertools.combinations(pooled, na)) / splits, True
    rng = random.Random(0)
    hits = sum(extreme(sum(rng.sample(pooled, na))) for _ in range(MONTE_CARLO))
    return (hits + 1) / (MONTE_CARLO + 1), False  # the observed split counted once (Phipson & Smyth 2010)
