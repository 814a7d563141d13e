"""Generate the six algorithmic tasks of Ontañón et al. (2022) (Table 7) as fairseq data.

    Santiago Ontañón, Joshua Ainslie, Vaclav Cvicek and Zachary Fisher. 2022. "Making Transformers Solve
    Compositional Tasks". ACL 2022.

    fairseq-compgen prep algorithmic --out data/ontanon/algorithmic [--tasks add reverse ...] [--seed 0] \
        [--train-size 200000] [--test-size 1024] [--joined-dictionary] [--no-binarize]

Writes ``OUT/<task>/{train,valid,test}.{src,tgt}`` (valid: a fresh in-distribution sample; test: the longer
out-of-distribution lengths the paper reports) and fairseq binaries in ``OUT/<task>/bin/``. Tasks: add, addneg,
reverse, dup, cart, inters. The copy-decoder models (`ontanon_*_c`, small-*, large-*) need
``--joined-dictionary`` (the paper's unified vocabulary). Repetitions of the paper regenerate the data:
use a different ``--seed`` per repetition.

The six synthetic tasks (the paper's §3 and Table 7):

Each generator yields (source, target) strings of space-separated tokens in fairseq form: the source without the
trailing [END] and the target without [START]/[END] (fairseq appends EOS to both and the decoder starts from EOS,
which play [END] and [START]). The separator is the token "[SEP]".

Subsets (`make_task`): `train` (200,000 examples, the training lengths, drawn independently with replacement, so
duplicates are possible), `valid` (a fresh in-distribution sample, the notebook's second evaluation set) and `test`
(the out-of-distribution "hard" set with the longer lengths, the one the paper reports). Test size is Table 7's
1024 (the authors' code uses 512 for Add and AddNeg; pass test_size=512 for that).

Seeding: every subset has its own `random.Random` seeded with the string "<seed>/<task>/<subset>", so a subset does
not change when another subset's size changes, and runs are reproducible across machines.

Table 7's vocabulary counts the authors' [PAD], [END], [START] and [SEP] (even where [SEP] is unused):
`len(VOCAB[task]) + 3` (VOCAB includes "[SEP]") is Table 7's number.
"""
import random
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from fairseq_compgen.data.dataset import Dataset, Split
from fairseq_compgen.errors import UsageError

SEP = "[SEP]"
DIGITS = [str(i) for i in range(10)]
LETTERS = list("abcdefghij")
INTERS_SYMBOLS = [f"{c}{d}" for c in LETTERS for d in DIGITS]  # a0 .. j9
ADD_WIDTH = 12

Pair = Tuple[str, str]

# task -> (train lengths, test lengths): Ontañón et al. Table 7 and the authors' generator
LENGTHS = {
    "add": ((1, 8), (9, 10)),
    "addneg": ((1, 8), (9, 10)),
    "reverse": ((1, 16), (17, 24)),
    "dup": ((1, 16), (17, 24)),
    "cart": ((1, 6), (7, 8)),
    "inters": ((1, 16), (17, 24)),
}
TASKS = tuple(LENGTHS)
TRAIN_SIZE, TEST_SIZE = 200_000, 1024
VOCAB = {
    "add": set(DIGITS) | {SEP},
    "addneg": set(DIGITS) | {SEP, "-", "#"},
    "reverse": set(DIGITS) | {SEP},
    "dup": set(DIGITS) | {SEP},
    "cart": set(DIGITS) | set(LETTERS) | {SEP},
    "inters": set(INTERS_SYMBOLS) | {SEP, "true", "false"},
}
TABLE7_VOCAB = {"add": 14, "addneg": 16, "reverse": 14, "dup": 14, "cart": 24, "inters": 106}


def _pad_left(tokens: List[str], pad: str, width: int = ADD_WIDTH) -> List[str]:
    if len(tokens) > width:
        raise UsageError(f"{' '.join(tokens)} is longer than {width} tokens")
    return [pad] * (width - len(tokens)) + tokens


def _number(value: int) -> List[str]:
    """Digits of |value| without leading zeros, "-" first if negative; 0 -> [] (the authors' generator)."""
    digits = list(str(abs(value))) if value != 0 else []
    return (["-"] if value < 0 else []) + digits


def addition(rng: random.Random, lengths: Tuple[int, int], negatives: bool = False) -> Pair:
    """Add (pad "0") or AddNeg (pad "#", each operand negative with probability 0.25)."""
    pad = "#" if negatives else "0"
    operands, values = [], []
    for _ in range(2):
        digits = [rng.choice(DIGITS) for _ in range(rng.randint(*lengths))]  # leading zeros possible
        value = int("".join(digits))
        if negatives and rng.random() < 0.25:
            digits, value = ["-"] + digits, -value
        operands.append(_pad_left(digits, pad))
        values.append(value)
    target = _pad_left(_number(sum(values)), pad)
    return " ".join(operands[0] + [SEP] + operands[1]), " ".join(target)


def reverse(rng: random.Random, lengths: Tuple[int, int]) -> Pair:
    digits = [rng.choice(DIGITS) for _ in range(rng.randint(*lengths))]
    return " ".join(digits), " ".join(reversed(digits))


def duplicate(rng: random.Random, lengths: Tuple[int, int]) -> Pair:
    digits = [rng.choice(DIGITS) for _ in range(rng.randint(*lengths))]
    return " ".join(digits), " ".join(digits + digits)


def cartesian(rng: random.Random, lengths: Tuple[int, int]) -> Pair:
    """Set 1 from digits, set 2 from letters, with replacement; target: for i in set 1, for j in set 2: `i j [SEP]`
    (the authors' code order, with the trailing [SEP])."""
    s1 = [rng.choice(DIGITS) for _ in range(rng.randint(*lengths))]
    s2 = [rng.choice(LETTERS) for _ in range(rng.randint(*lengths))]
    target = [tok for i in s1 for j in s2 for tok in (i, j, SEP)]
    return " ".join(s1 + [SEP] + s2), " ".join(target)


def intersection(rng: random.Random, lengths: Tuple[int, int], label: bool) -> Pair:
    """The authors' generator: set 1 = L1 draws kept if new; set 2 = L2 distinct draws (for `false` elements of set 1 are
    rejected; for `true` they are accepted and, if none was drawn, one random position is overwritten by an
    element of set 1)."""
    l1, l2 = rng.randint(*lengths), rng.randint(*lengths)
    s1: List[str] = []
    for _ in range(l1):
        x = rng.choice(INTERS_SYMBOLS)
        if x not in s1:
            s1.append(x)
    s2: List[str] = []
    overlap = False
    while len(s2) < l2:
        x = rng.choice(INTERS_SYMBOLS)
        if x in s2 or (not label and x in s1):
            continue
        overlap |= x in s1
        s2.append(x)
    if label and not overlap:
        s2[rng.randrange(len(s2))] = rng.choice(s1)
    return " ".join(s1 + [SEP] + s2), "true" if label else "false"


def _example_fn(task: str) -> Callable[[random.Random, Tuple[int, int], int], Pair]:
    return {
        "add": lambda rng, lens, i: addition(rng, lens),
        "addneg": lambda rng, lens, i: addition(rng, lens, negatives=True),
        "reverse": lambda rng, lens, i: reverse(rng, lens),
        "dup": lambda rng, lens, i: duplicate(rng, lens),
        "cart": lambda rng, lens, i: cartesian(rng, lens),
        "inters": lambda rng, lens, i: intersection(rng, lens, label=(i % 2 == 0)),  # exactly balanced
    }[task]


def generate(task: str, subset: str, size: int, seed: int = 0) -> Iterator[Pair]:
    """`size` examples of `task` for `subset` (train/valid: training lengths; test: the longer test lengths)."""
    if task not in LENGTHS:
        raise UsageError(f"unknown algorithmic task {task!r}; choose from {', '.join(TASKS)}")
    train_lengths, test_lengths = LENGTHS[task]
    lengths = test_lengths if subset == "test" else train_lengths
    rng = random.Random(f"{seed}/{task}/{subset}")
    fn = _example_fn(task)
    for i in range(size):
        yield fn(rng, lengths, i)


def make_task(task: str, seed: int = 0, train_size: int = TRAIN_SIZE, test_size: int = TEST_SIZE,
              valid_size: Optional[int] = None) -> Dict[str, List[Pair]]:
    """{"train", "valid", "test"} -> examples (valid: in-distribution, `valid_size` defaults to `test_size`)."""
    sizes = {"train": train_size, "valid": test_size if valid_size is None else valid_size, "test": test_size}
    return {subset: list(generate(task, subset, n, seed)) for subset, n in sizes.items()}


# ---------------------------------------------------------------------------
# fairseq-compgen prep algorithmic
# ---------------------------------------------------------------------------


def add_arguments(p) -> None:
    p.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    p.add_argument("--seed", type=int, default=0, help="data seed (default 0)")
    p.add_argument("--train-size", type=int, default=TRAIN_SIZE, help="default 200000 (Table 7)")
    p.add_argument("--test-size", type=int, default=TEST_SIZE,
                   help="size of valid and test (default 1024, Table 7; the authors' code uses 512 for add/addneg)")


def read(args):
    """One :class:`Split` per task of ``--tasks`` (its counts: the sizes asked for)."""
    for task in args.tasks:
        data = make_task(task, seed=args.seed, train_size=args.train_size, test_size=args.test_size)
        yield Split(data, folder=task, title=f"{task} (Ontañón et al. 2022, seed {args.seed})",
                    expected={subset: len(ex) for subset, ex in data.items()})


DATASET = Dataset(read=read, add_arguments=add_arguments, count_check=False, dict_from="all", dataset_json=False)
