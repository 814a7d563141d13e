"""Training recipes as data: each (paper, dataset) recipe is written once, in recipes.yaml beside this file.

    from fairseq_compgen import recipes
    recipes.names()                                   # ['chaabouni/iwslt14', 'chaabouni/scan', 'csordas/cfq', ...]
    recipes.get("csordas/scan").options              # {'task': 'compgen', 'criterion': 'cross_entropy', ...}
    recipes.train_args("csordas/scan", "rel_uni_transformer_scan", "data/scan/length_cutoff_26/bin", "runs/x",
                       ["--seed", "1"])              # fairseq-train's arguments (without the program name)

`fairseq-compgen train RECIPE ARCH DATA SAVE [--dry-run]` runs (or prints) that command, sweep files name a recipe per
dataset (`recipe: csordas/scan`), `fairseq-compgen recipes [NAME]` lists them or shows one. The file's header documents
its format (ordered fairseq-train options, `extends`, the computed `noam` lr and `valid-subset: auto`). Loading
checks the file; this module imports neither fairseq nor torch.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import yaml

from fairseq_compgen.errors import UsageError

FILE = Path(__file__).with_name("recipes.yaml")
PACKAGE = Path(__file__).resolve().parents[1]  # the --user-dir fairseq imports
KEYS = {"extends", "paper", "note", "arch", "options"}
OPTION = re.compile(r"[a-z][a-z0-9-]*")


@dataclass(frozen=True)
class Recipe:
    name: str
    paper: str
    note: str = ""
    arch: Optional[str] = None  # the arch the recipe was written for (a default; ARCH on the command line wins)
    options: Dict[str, object] = field(default_factory=dict)  # option -> str | True | {"noam": [b, d, w]}


@functools.lru_cache(maxsize=None)
def _load(path: Path = FILE) -> Dict[str, Recipe]:
    # BaseLoader: every scalar stays the string it is in the file ("1e-3" stays "1e-3", not 0.001)
    raw = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    lines = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line and not line[0].isspace() and not line.startswith("#") and line.rstrip().endswith(":"):
            lines[line.rstrip()[:-1]] = i
    out: Dict[str, Recipe] = {}

    def build(name: str, seen=()) -> Recipe:
        if name in out:
            return out[name]
        where = f"{path}:{lines.get(name, '?')}"
        if name in seen:
            raise UsageError(f"{where}: recipe {name!r} extends itself (through {' -> '.join(seen)})")
        r = raw[name]
        if not isinstance(r, dict) or set(r) - KEYS:
            raise UsageError(f"{where}: recipe {name!r}: expected a mapping with keys among {sorted(KEYS)}")
        options: Dict[str, object] = {}
        base = None
        if "extends" in r:
            if r["extends"] not in raw:
                raise UsageError(f"{where}: recipe {name!r} extends unknown recipe {r['extends']!r}")
            base = build(r["extends"], seen + (name,))
            options.update(base.options)
        for key, value in (r.get("options") or {}).items():
            if not OPTION.fullmatch(key):
                raise UsageError(f"{where}: recipe {name!r}: {key!r} is not a fairseq-train option name (quote values "
                                 f"with commas inside {{...}}: adam-betas: '(0.9, 0.98)')")
            if value == "false":
                options.pop(key, None)
            elif value == "true":
                options[key] = True
            elif isinstance(value, dict) and set(value) == {"noam"} and len(value["noam"]) == 3:
                options[key] = {"noam": [float(v) for v in value["noam"]]}
            elif isinstance(value, str):
                options[key] = value
            else:
                raise UsageError(f"{where}: recipe {name!r}: option {key!r}: expected a value, true/false or "
                                 f"{{noam: [BASE, D_MODEL, WARMUP]}}, got {value!r}")
        out[name] = Recipe(name=name, paper=r.get("paper", base.paper if base else ""), note=r.get("note", ""),
                           arch=r.get("arch", base.arch if base else None), options=options)
        return out[name]

    for name in raw:
        build(name)
    return out


def names() -> List[str]:
    """The recipes a user can name (bases, whose names start with `_`, left out)."""
    return sorted(n for n in _load() if not n.startswith("_"))


def get(name: str) -> Recipe:
    recipes = _load()
    if name not in recipes or name.startswith("_"):
        raise UsageError(f"unknown recipe {name!r} (known: {', '.join(names())}; `fairseq-compgen recipes` describes them)")
    return recipes[name]


def noam_peak(base: float, d_model: float, warmup: float) -> float:
    """Noam's lr_base * d^-0.5 * min(step^-0.5, step * warmup^-1.5) peaks at step = warmup, at
    lr_base / sqrt(d * warmup): the --lr of fairseq's inverse_sqrt schedule with that warmup."""
    return base / math.sqrt(d_model * warmup)


def is_tagging(data) -> bool:
    """A COGS tagging folder (`fairseq-compgen prep cogs_tagging`: <subset>.parent files), not fairseq binaries."""
    return any(Path(data).glob("*.parent"))


def subsets_of(data) -> List[str]:
    """The evaluable subsets of a data folder, IID first: every binarized subset but train (`<subset>.*.idx`;
    for a COGS tagging folder `<subset>.parent`), in reverse alphabetical order (valid, test, gen)."""
    data = Path(data)
    pattern = "*.parent" if is_tagging(data) else "*.idx"
    found = {p.name.split(".")[0] for p in data.glob(pattern)} - {"train"}
    return sorted(found, reverse=True)


def _value(option: str, value, data) -> Optional[str]:
    if isinstance(value, dict):
        return repr(noam_peak(*value["noam"]))
    if value == "auto" and option == "valid-subset":
        return ",".join(subsets_of(data)) or "valid"
    return value


def train_args(recipe: Optional[str], arch: Optional[str], data, save, extra: Sequence[str] = ()) -> List[str]:
    """fairseq-train's arguments for RECIPE (None: only the structural defaults every recipe shares) with ARCH
    (None: the recipe's own arch) on DATA, saving to SAVE; `extra` flags come last, so they win."""
    r = get(recipe) if recipe else _load()["_structure_tagging" if is_tagging(data) else "_structure"]
    arch = arch or r.arch
    if not arch:
        raise UsageError(f"recipe {r.name!r} has no default arch: name one (fairseq-compgen help lists them)")
    options = dict(r.options)
    args = [str(data), "--user-dir", str(PACKAGE), "--task", str(options.pop("task", "compgen")), "--arch", arch]
    options.pop("arch", None)
    for option, value in options.items():
        value = _value(option, value, data)
        args += [f"--{option}"] if value is True else [f"--{option}", value]
    return args + ["--save-dir", str(save), *extra]
