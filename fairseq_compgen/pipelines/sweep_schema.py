"""The sweep file's schema, checked as a whole before any run starts.

A misspelled key (`subset:` for `subsets:`) or a value of the wrong type (`subsets: valid` for a list) used to be
ignored or misread and to fail, if at all, after training. The file is now merged into the typed schema below with
OmegaConf's structured configs (already a fairseq dependency; fairseq/hydra users know it): unknown keys, wrong
types and missing required keys are refused with one line naming the file, the line and the key. The fields and
their meaning are documented in :mod:`fairseq_compgen.pipelines.sweep`.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml
from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from fairseq_compgen.errors import UsageError


@dataclass
class LaunchSpec:
    gpus: int = 1
    cpu: bool = False
    cpu_procs: Optional[int] = None


@dataclass
class DatasetSpec:
    data: str = MISSING
    prep: Optional[str] = None  # the command that prepares `data` (shown when the folder is missing)
    label: Optional[str] = None
    recipe: Optional[str] = None  # a training recipe (fairseq_compgen/recipes/recipes.yaml)
    metric: str = "exact_match"  # fairseq-compgen eval --metric: a scorer of fairseq_compgen/scoring/
    subsets: Optional[List[str]] = None
    flags: Any = None  # a list of flags, or one string (checked below)
    seeds: Optional[List[int]] = None
    vars: Dict[str, str] = field(default_factory=dict)


@dataclass
class ConfigurationSpec:
    arch: str = MISSING
    label: Optional[str] = None
    flags: Any = None
    datasets: Optional[List[str]] = None
    recipes: Dict[str, str] = field(default_factory=dict)  # a dataset's recipe -> this configuration's
    paper: Dict[str, Any] = field(default_factory=dict)  # "dataset/subset" -> the paper's value, shown as written


@dataclass
class SweepSpec:
    name: Optional[str] = None
    output: Optional[str] = None
    seeds: List[int] = field(default_factory=lambda: [1])
    launch: LaunchSpec = field(default_factory=LaunchSpec)
    flags: Any = None
    generate_flags: Optional[str] = None
    datasets: Dict[str, DatasetSpec] = MISSING
    configurations: Dict[str, ConfigurationSpec] = MISSING


def _line(root: Optional[yaml.Node], key: str) -> Optional[int]:
    """1-based line of the dotted `key` (e.g. datasets.scan.subset, seeds[1]) in the composed YAML, or of the
    deepest part of it that exists."""
    node, line = root, None
    for part in key.replace("[", ".[").split("."):
        if node is None or not part:
            break
        if part.startswith("[") and isinstance(node, yaml.SequenceNode):
            i = int(part[1:-1])
            node = node.value[i] if i < len(node.value) else None
        elif isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if k.value == part]
            if not match:
                break
            line = match[0][0].start_mark.line + 1
            node = match[0][1]
            continue
        else:
            break
        if node is not None:
            line = node.start_mark.line + 1
    return line


class _DuplicateKey(Exception):
    def __init__(self, key, line: int, first: int):
        super().__init__(key, line, first)
        self.key, self.line, self.first = key, line, first


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping (at any depth: two configurations of
    the same name, `seeds:` twice) is an error instead of the last one silently winning. Merge keys (`<<:`)
    still override as YAML says."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: Dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:  # an unhashable key: the safe loader's own error follows
                    continue
                if first != key_node.start_mark.line + 1:
                    raise _DuplicateKey(key, key_node.start_mark.line + 1, first)
        return super().construct_mapping(node, deep)


def _key_line(root: Optional[yaml.Node], section: str, name: str) -> Optional[int]:
    """1-based line of the entry `name` of the top-level mapping `section` (a name may hold dots or slashes)."""
    if not isinstance(root, yaml.MappingNode):
        return None
    for k, v in root.value:
        if k.value == section and isinstance(v, yaml.MappingNode):
            for kk, _ in v.value:
                if kk.value == str(name):
                    return kk.start_mark.line + 1
            return k.start_mark.line + 1
    return None


def unsafe_name(name) -> Optional[str]:
    """Why a dataset or configuration name cannot be a folder name of OUT/<dataset>/<configuration>/ (None if
    it can): a path separator, '.', '..' or an empty name would put run folders elsewhere than under OUT."""
    text = str(name)
    if text in ("", ".", ".."):
        return f"{text!r} is not a folder name"
    for sep in {"/", "\\", os.sep, os.altsep} - {None}:
        if sep in text:
            return f"{text!r} holds the path separator {sep!r}"
    if "\0" in text:
        return f"{text!r} holds a NUL character"
    return None


def line_of(path, key: str) -> Optional[int]:
    """1-based line of the dotted `key` (see _line) in the sweep file `path` (or a packaged sweep's name)."""
    try:
        return _line(yaml.compose(resolve(path).read_text(encoding="utf-8")), key)
    except (OSError, yaml.YAMLError, UsageError):
        return None


def _flags_problem(value) -> Optional[str]:
    """Why `value` is no flags entry (None, one string of flags, or a list of flags and numbers), or None."""
    if not (value is None or isinstance(value, str) or (
            isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value))):
        return "expected a list of flags or one string of flags"
    for text in [value] if isinstance(value, str) else [v for v in value or [] if isinstance(v, str)]:
        try:
            shlex.split(text)  # how sweep.py splits them
        except ValueError as e:  # "No closing quotation": a traceback when the runs were planned
            return f"{text!r}: {str(e)[0].lower()}{str(e)[1:]}: expected flags split like a shell (quotes in pairs)"
    return None


SWEEPS = Path(__file__).resolve().parents[1] / "sweeps"  # the sweep files shipped with the package


def resolve(name) -> Path:
    """A sweep file: `name` as a path if it exists, else the packaged sweep of that name (`csordas_table3` or
    `csordas_table3.yaml`, from fairseq_compgen/sweeps/)."""
    path = Path(name)
    if path.is_file():
        return path
    shipped = SWEEPS / (path.name if path.suffix in (".yaml", ".yml") else f"{path.name}.yaml")
    if path.parent == Path(".") and shipped.is_file():
        return shipped
    known = ", ".join(sorted(p.stem for p in SWEEPS.glob("*.yaml")))
    raise UsageError(f"sweep file not found: {name} (a path, or a packaged sweep: {known})")


def placeholders(name: str, dataset: dict) -> dict:
    """What a sweep file's dataset fills into its `data:` and its runs' flags and arch: {name} (the dataset's name),
    {recipe} (its recipe's last part) and its `vars:`."""
    return {"name": name, "recipe": (dataset.get("recipe") or "").rsplit("/", 1)[-1], **(dataset.get("vars") or {})}


def _fill_problem(text, names: dict) -> Optional[str]:
    """Why str.format cannot fill `text` from `names` (an unknown placeholder, a lone brace), or None."""
    try:
        str(text).format(**names)
    except KeyError as e:
        return f"unknown placeholder {{{e.args[0]}}}"
    except IndexError:
        return "a positional placeholder ({} or {0})"
    except (ValueError, AttributeError) as e:
        return str(e)
    return None


def packaged() -> list:
    """The names of the sweeps shipped with the package."""
    return sorted(p.stem for p in SWEEPS.glob("*.yaml"))


def load_spec(path) -> dict:
    """The sweep file at `path` (or a packaged sweep's name, see resolve) as a plain dict with every default
    filled in; UsageError on any schema error."""
    path = resolve(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"sweep file not found: {path}") from None
    try:
        root = yaml.compose(text)
        raw = yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKey as e:
        raise UsageError(f"{path}:{e.line}: key {e.key!r} appears twice in one mapping (first at line {e.first}): "
                         f"expected each key once (the last one would silently win)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise UsageError(f"{path}{where}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: a sweep file is a mapping with 'datasets' and 'configurations'")

    def fail(key: str, message: str):
        line = _line(root, key)
        raise UsageError(f"{path}{f':{line}' if line else ''}: {key}: {message}")

    try:
        cfg = OmegaConf.merge(OmegaConf.structured(SweepSpec), OmegaConf.create(raw))
        spec = OmegaConf.to_container(cfg, throw_on_missing=True)
    except OmegaConfBaseException as e:
        key = str(getattr(e, "full_key", "") or "")
        first = str(e).splitlines()[0]
        if "not in" in first and type(e).__name__ == "ConfigKeyError":
            fields = sorted(getattr(getattr(e, "object_type", None), "__dataclass_fields__", {}))
            known = f" (known: {', '.join(fields)})" if fields else ""
            first = f"unknown key{known}"
        elif "is not a ListConfig" in first:
            first = "expected a list, e.g. [a, b]"
        elif "is not a subclass of" in first or "DictConfig" in first:
            first = "expected a mapping"
        fail(key, first)
    for where, entries in (("datasets", spec["datasets"]), ("configurations", spec["configurations"])):
        if not entries:
            fail(where, "needs at least one entry")
        for name, entry in entries.items():
            why = unsafe_name(name)
            if why:
                line = _key_line(root, where, name)
                raise UsageError(f"{path}{f':{line}' if line else ''}: {where}: {why}: expected a plain name (it "
                                 f"becomes a folder of the output, OUT/<dataset>/<configuration>/seed<k>)")
            if _flags_problem(entry["flags"]):
                fail(f"{where}.{name}.flags", _flags_problem(entry["flags"]))
    for key in ("flags", "generate_flags"):
        if _flags_problem(spec[key]):
            fail(key, _flags_problem(spec[key]))
    for key, seeds in [("seeds", spec["seeds"])] + [(f"datasets.{d}.seeds", entry["seeds"])
                                                     for d, entry in spec["datasets"].items()]:
        if seeds is None:
            continue
        if not seeds:
            fail(key, "expected at least one seed, e.g. [1, 2, 3] (an empty list would run nothing, or seed 1)")
        for i, seed in enumerate(seeds):
            if seed < 0:
                fail(f"{key}[{i}]", f"seed {seed}: expected a seed of 0 or more (fairseq-train's --seed)")
            if seed in seeds[:i]:
                fail(f"{key}[{i}]", f"seed {seed} is listed twice: expected each seed once (the same run would be "
                                    f"planned twice)")
    procs, gpus = spec["launch"]["cpu_procs"], spec["launch"]["gpus"]
    if procs is not None and procs < 1:
        fail("launch.cpu_procs", f"{procs}: expected a number of processes, at least 1")
    if gpus < 0:
        fail("launch.gpus", f"{gpus}: expected a number of GPUs, 0 or more")
    for dname, d in spec["datasets"].items():  # every text with {placeholders}, as sweep.plan fills them
        names = placeholders(dname, d)
        texts = [(f"datasets.{dname}.data", d["data"]), (f"datasets.{dname}.flags", d["flags"]),
                 ("flags", spec["flags"])]
        texts += [(f"configurations.{c}.{field}", entry[field]) for c, entry in spec["configurations"].items()
                  if entry["datasets"] is None or dname in entry["datasets"] for field in ("arch", "flags")]
        for key, value in texts:
            for text in [value] if isinstance(value, str) else value or []:
                problem = _fill_problem(text, names)
                if problem:
                    fail(key, f"{str(text)!r}: {problem} (filled for dataset {dname!r}): expected placeholders among "
                              f"{', '.join('{' + n + '}' for n in names)} (the dataset's name, its recipe's last "
                              f"part, its vars:), with literal braces doubled ({{{{ and }}}})")
    for cname, c in spec["configurations"].items():
        for d in c["datasets"] or []:
            if d not in spec["datasets"]:
                fail(f"configurations.{cname}.datasets", f"no dataset {d!r} in this file")
        for key, value in c["paper"].items():
            dataset, _, subset = str(key).partition("/")
            if dataset not in spec["datasets"] or not subset:
                fail(f"configurations.{cname}.paper", f"{key!r}: expected DATASET/SUBSET with a dataset of this file "
                                                      f"({', '.join(spec['datasets'])}), e.g. "
                                                      f"{next(iter(spec['datasets']))}/gen")
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                fail(f"configurations.{cname}.paper", f"{key!r}: expected the paper's value as a number or a string, "
                                                      f"e.g. \"0.30 ± 0.02\"")
    spec["name"] = spec["name"] or path.stem
    return spec
