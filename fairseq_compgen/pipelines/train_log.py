"""Read a fairseq-train log (its stdout + stderr, as the sweep's train.log holds it) written with
``--log-format simple`` or ``--log-format json``; a file may hold several runs (resumes) of either format, and the
sweep's own ``# ...`` lines, which are ignored. Standard library only.

fairseq 0.12 writes one record per line after ``DATE TIME | LEVEL | TAG | `` (found by running fairseq-train
both ways with ``--valid-subset valid,gen``)::

    simple  train_inner | epoch 002:      1 / 4 loss=3.953, ppl=15.49, ..., num_updates=5, lr=0.001, ...
            gen         | epoch 001 | valid on 'gen' subset | loss 3.633 | ... | accuracy 0 | ... | num_updates 4
            train       | epoch 001 | loss 3.965 | ... | num_updates 4 | lr 0.001 | ... | train_wall 0 | wall 1
    json    train_inner | {"epoch": 2, "update": 1.25, "loss": "3.953", ..., "num_updates": "5", ...}
            gen         | {"epoch": 1, "gen_loss": "3.633", ..., "gen_accuracy": "0", ..., "gen_num_updates": "4"}
            train       | {"epoch": 1, "train_loss": "3.965", ..., "train_num_updates": "4", ..., "train_wall": "1"}

TAG is the validated subset's name for a validation (one record per ``--valid-subset`` subset, the first may
add ``best_<metric>``), ``train`` for the end-of-epoch summary and ``train_inner`` for the ``--log-interval``
records. In JSON, a validation's and the summary's keys are prefixed with ``TAG_`` (``train_inner``'s are not) and
values are strings (``"0.5"``, ``"nan"``). A summary always has ``wall``, a validation never does: that tells an
epoch summary from a validation of a subset that is itself called ``train``.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple, Union

_HEADER = re.compile(r"\| (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \| ([^|]+?) \| (.*)$")
_SIMPLE_VALID = re.compile(r"valid on '([^']+)' subset((?: \|.*)?)$")
_INNER_FIELD = re.compile(r"(\w+)=(\S+?)(?:,|$)")


@dataclass
class Record:
    """One logged set of statistics. kind: "valid" (subset: the validated subset), "train" (end-of-epoch
    summary) or "train_inner"; stats: the numeric values by fairseq's unprefixed names (``loss``, ``accuracy``,
    ``best_loss``, ...), without ``epoch``, ``update`` and ``num_updates``; epoch: the epoch the record names."""
    kind: str
    subset: Optional[str]
    num_updates: Optional[int]
    stats: Dict[str, float] = field(default_factory=dict)
    epoch: Optional[int] = None
    time: Optional[datetime.datetime] = None  # the line's timestamp (fairseq's `DATE TIME |`, the sweep's `# DATE`)


def _number(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _record(kind: str, subset: Optional[str], pairs: Iterable[Tuple[str, object]]) -> Record:
    stats = {k: v for k, v in ((k, _number(v)) for k, v in pairs) if v is not None}
    updates, epoch = stats.pop("num_updates", None), stats.pop("epoch", None)
    stats.pop("update", None)

    def whole(x):
        return int(x) if x is not None and math.isfinite(x) else None

    return Record(kind, subset, whole(updates), stats, whole(epoch))


def _pipe_fields(text: str) -> Iterator[Tuple[str, str]]:
    """`` | loss 3.2 | accuracy 0 | ...`` -> (name, value) pairs."""
    for part in text.split(" | "):
        name, _, value = part.strip().partition(" ")
        if name and value:
            yield name, value.strip()


_START = re.compile(r"^# (\S+) sweep: ")  # the sweep's line before each invocation of a run (runner.py)
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \|")  # fairseq's: 2026-11-23 20:36:15 | INFO | ...


def _time(text: Optional[str]) -> Optional[datetime.datetime]:
    try:
        return datetime.datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def parse_line(line: str) -> Optional[Record]:
    """The record of one log line, or None for anything else (fairseq's other messages, the sweep's other lines).
    The sweep's ``# DATE sweep: COMMAND`` line before each invocation is a record of kind "start". Each record has
    its line's timestamp where the line has one."""
    if line.startswith("#"):
        m = _START.match(line)
        return Record("start", None, None, time=_time(m.group(1))) if m else None
    stamp = _STAMP.match(line)
    record = _parse(line)
    if record is not None and stamp:
        record.time = _time(stamp.group(1))
    return record


def _parse(line: str) -> Optional[Record]:
    line = line.rstrip("\r\n")
    m = _SIMPLE_VALID.search(line)
    if m:
        return _record("valid", m.group(1), _pipe_fields(m.group(2)))
    m = _HEADER.search(line)
    if not m:
        return None
    tag, body = m.group(1), m.group(2).strip()
    if body.startswith("{"):
        try:
            stats = json.loads(body)
        except ValueError:
            return None
        if not isinstance(stats, dict):
            return None
        if tag == "train_inner":
            return _record("train_inner", None, stats.items())
        prefix = tag + "_"
        if prefix + "num_updates" not in stats:
            return None
        pairs = [(k[len(prefix):], v) for k, v in stats.items() if k.startswith(prefix)] + [("epoch", stats.get("epoch"))]
        if tag == "train" and prefix + "wall" in stats:
            return _record("train", None, pairs)
        return _record("valid", tag, pairs)
    if tag == "train_inner":
        return _record("train_inner", None, _INNER_FIELD.findall(body))
    if tag == "train" and body.startswith("epoch "):
        return _record("train", None, _pipe_fields(body))
    return None


def read_records(log: Union[str, os.PathLike]) -> List[Record]:
    """Every record of the log file, in order ([] when there is no such file)."""
    path = Path(log)
    if not path.is_file():
        return []
    with open(path, errors="replace") as f:
        return [r for r in map(parse_line, f) if r is not None]


def validation_records(log: Union[str, os.PathLike]) -> List[Tuple[str, int, Dict[str, float]]]:
    """(subset, num_updates, {metric: value}) of every validation in the log, in order (a resumed run may
    repeat an update: the later record is the newer)."""
    return [(r.subset, r.num_updates, r.stats) for r in read_records(log)
            if r.kind == "valid" and r.num_updates is not None]


def train_wall(log: Union[str, os.PathLike]) -> Optional[float]:
    """The training time in seconds: fairseq's `wall` (the trainer's clock, validation and checkpointing included)
    of the last training summary of each invocation, summed; None without a summary. The clock starts again when a
    run resumes, so a resumed run's invocations are added up; each counts to its last epoch summary (the time after
    it, retrained on resuming, is not counted). Invocations are told apart by the sweep's start lines, or, in a log
    without them, by the clock going back. A resumed invocation logged before tasks/clocks.py restarted fairseq's
    stopwatch says `wall 0` throughout: its time is its last summary's timestamp less its start line's (or, without
    one, less its first record's)."""
    return _summed_clock(log, "wall")


def train_cpu(log: Union[str, os.PathLike]) -> Optional[float]:
    """The training process's CPU seconds (`cpu_s`, tasks/cpu_clock.py: a pause of the process does not count, its
    threads all do), added up over invocations as train_wall adds up `wall`; None when an invocation's summaries
    lack it (invocations trained before it was logged, 2026-11-27, or by a task not of this package)."""
    return _summed_clock(log, "cpu_s")


def _summed_clock(log: Union[str, os.PathLike], key: str) -> Optional[float]:
    """The clock `key` of each invocation's last training summary, summed (see train_wall); None without a summary,
    or when an invocation has summaries without `key`."""
    invocations: List[dict] = [{}]  # each: its first timestamp, its last summary's clock and timestamp
    lacking = False  # an invocation had a summary without `key`
    for r in read_records(log):
        summary = r.kind == "train"  # an epoch summary (parse_line gives kind "train" to nothing else)
        clock = r.stats.get(key) if summary else None
        now = invocations[-1]
        if r.kind == "start" or (clock is not None and now.get("clock") is not None and clock < now["clock"]):
            invocations.append({})
            now = invocations[-1]
        now.setdefault("first", r.time)
        if clock is not None:
            now.update(clock=clock, last=r.time)
        lacking = lacking or (summary and clock is None)
    found = [_clock_or_stamps(i, key) for i in invocations if i.get("clock") is not None]
    return sum(found) if found and not lacking else None


def _clock_or_stamps(invocation: dict, key: str) -> float:
    """An invocation's clock at its last summary; for `wall` stuck at 0 (fairseq's stopwatch restored stopped on
    resuming, tasks/clocks.py), the seconds between its first timestamp and its last summary's, where both exist."""
    clock, first, last = invocation["clock"], invocation.get("first"), invocation.get("last")
    if key == "wall" and clock == 0 and first is not None and last is not None:
        return max(0.0, (last - first).total_seconds())
    return clock


def last_num_updates(log: Union[str, os.PathLike]) -> Optional[int]:
    """The last num_updates the log records (None when there is none, or no such file)."""
    found = [r.num_updates for r in read_records(log) if r.num_updates is not None]
    return found[-1] if found else None
