"""Record or check the sha256 of every file `fairseq-compgen prep` writes, for every dataset, on the local copies.

    python scripts/prep_golden.py --data ../shared/data --record tests/fixtures/prep_golden.json
    python scripts/prep_golden.py --data ../shared/data --check tests/fixtures/prep_golden.json
    python scripts/prep_golden.py --data ../shared/data --check tests/fixtures/prep_golden.json --text-only

Each case is one prep command (``prep.main(argv)``, as `fairseq-compgen prep ...` runs it) writing into its own
folder; the fixture holds the command and, per output file, its sha256 (text, ``.cat``, ``dataset.json``,
dictionaries, binaries, BPE codes, sentencepiece models; ``preprocess.log`` aside, it names temporary paths).
``--check`` (with binaries) takes a few minutes on one core; ``--text-only`` adds ``--no-binarize`` to the
datasets that have it and compares every file but ``bin/`` and the manifest ``.prep-files.json`` (which lists
``bin/``), which is what tests/test_prep_golden.py runs. The inputs that the local copies lack (a PCFG SET
``train.src``, IWSLT'14's training files) are built from the files that are there, the same way every time.
The refactoring that made every dataset one module (fairseq_compgen/data/, registered in fairseq_compgen/prep/)
was checked with this script: the outputs are byte-identical before and after.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
SKIPPED = {"preprocess.log"}  # names the temporary folder it was written in


def _pcfg_inputs(data: Path, work: Path) -> Path:
    """A PCFG SET folder: productivity's train = the released dev set (train.src is not in the local copy),
    test = the released productivity test set; pcfgset's train, dev and test = its dev set."""
    folder = work / "pcfg"
    for ext in ("src", "tgt"):
        (folder / "productivity").mkdir(parents=True, exist_ok=True)
        (folder / "pcfgset").mkdir(parents=True, exist_ok=True)
        dev = (data / "pcfg" / "pcfgset" / f"dev.{ext}").read_bytes()
        (folder / "productivity" / f"train.{ext}").write_bytes(dev)
        shutil.copyfile(data / "pcfg" / "productivity" / f"test.{ext}", folder / "productivity" / f"test.{ext}")
        for stem in ("train", "dev", "test"):
            (folder / "pcfgset" / f"{stem}.{ext}").write_bytes(dev)
    return folder


def _iwslt_inputs(data: Path, work: Path) -> Path:
    """An IWSLT'14 de-en folder: the released XML sets, and train.tags.de-en.{de,en} made of the segments of
    TED.tst2012 with the tag lines the recipe drops or strips (the training files are not in the local copy)."""
    import re

    folder = work / "iwslt14" / "de-en"
    folder.mkdir(parents=True)
    for p in sorted((data / "iwslt14").glob("*.xml")):
        shutil.copyfile(p, folder / p.name)
    seg = re.compile(r'<seg id="\d+">(.*?)</seg>')
    for lang in ("de", "en"):
        xml = (data / "iwslt14" / f"IWSLT14.TED.tst2012.de-en.{lang}.xml").read_text(encoding="utf-8")
        lines = ["<url>http://www.ted.com/talks/x.html</url>", "<talkid>1</talkid>", "<keywords>k</keywords>",
                 f"<title>title {lang}</title>", f"<description>description {lang}</description>"]
        lines += [m.group(1).strip() for m in seg.finditer(xml)]
        (folder / f"train.tags.de-en.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder.parent


# case -> (argv, with {data} = the local copies, {out} = the case's output folder, {work} = built inputs);
# after: a case run after another in the same output folder (russin reads a SCAN split)
CASES: Dict[str, List[str]] = {
    "scan_generated": ["scan", "--split", "all-generated", "--out", "{out}"],
    "scan_simple": ["scan", "--split", "simple", "--out", "{out}", "--scan-dir", "{data}/scan"],
    "scan_official_length": ["scan", "--split", "official_length", "--out", "{out}", "--scan-dir", "{data}/scan"],
    "scan_official_addprim_jump": ["scan", "--split", "official_addprim_jump", "--out", "{out}",
                                   "--scan-dir", "{data}/scan"],
    "scan_around_right_joined": ["scan", "--split", "around_right", "--out", "{out}", "--scan-dir", "{data}/scan",
                                 "--joined-dictionary"],
    "scan_length_cutoff_26_dict_all": ["scan", "--split", "length_cutoff_26", "--out", "{out}", "--dict-from", "all"],
    "russin": ["russin", "{work}/russin/addprim_jump"],
    "cogs": ["cogs", "--out", "{out}", "--cogs-dir", "{data}/cogs"],
    "cogs_joined": ["cogs", "--out", "{out}", "--cogs-dir", "{data}/cogs", "--joined-dictionary"],
    "cogs_tagging": ["cogs_tagging", "--out", "{out}", "--cogs-dir", "{data}/cogs"],
    "cfq_mcd1": ["cfq", "--split", "mcd1", "--out", "{out}", "--preprocessed-dir", "{data}/cfq/mcd1_preprocessed"],
    "cfq_mcd1_intermediate": ["cfq", "--split", "mcd1", "--out", "{out}", "--preprocessed-dir",
                              "{data}/cfq/mcd1_preprocessed", "--intermediate"],
    "pcfg_productivity": ["pcfg", "--split", "productivity", "--out", "{out}", "--pcfg-dir", "{work}/pcfg",
                          "--no-count-check"],
    "pcfg_pcfgset_joined": ["pcfg", "--split", "pcfgset", "--out", "{out}", "--pcfg-dir", "{work}/pcfg",
                            "--no-count-check", "--joined-dictionary"],
    "mathematics": ["mathematics", "--module", "all", "--out", "{out}", "--math-dir", "{data}/math"],
    "algorithmic": ["algorithmic", "--out", "{out}", "--train-size", "300", "--test-size", "40"],
    "algorithmic_reverse_seed1_joined": ["algorithmic", "--out", "{out}", "--tasks", "reverse", "--seed", "1",
                                         "--train-size", "300", "--test-size", "40", "--joined-dictionary"],
    "noun_adj": ["noun_adj", "--out", "{out}", "--europarl-dir", "{data}/europarl", "--tagger", "pattern",
                 "--bpe-tokens", "300"],
    "iwslt14": ["iwslt14", "--out", "{out}", "--iwslt-dir", "{work}/iwslt14", "--bpe-tokens", "300",
                "--no-count-check"],
    "flores_ne_en": ["flores", "--out", "{out}", "--direction", "ne-en", "--flores-dir", "{data}/flores",
                     "--vocab-size", "1000"],
    "flores_en_si_separate": ["flores", "--out", "{out}", "--direction", "en-si", "--flores-dir", "{data}/flores",
                              "--vocab-size", "1000", "--separate-dictionaries"],
    "slog_varfree": ["slog", "--out", "{out}", "--slog-dir", "{data}/slog"],
    "slog_cogs_lf": ["slog", "--out", "{out}", "--slog-dir", "{data}/slog", "--lf", "cogs", "--train-file",
                     "{data}/slog/cogs_LF/dev.tsv", "--no-count-check"],
}
NO_BINARIZE_OPTION = {"russin", "cogs_tagging"}  # datasets whose prep has no --no-binarize


def digest(folder: Path, text_only: bool = False) -> Dict[str, str]:
    """relative path -> sha256 of every file under ``folder`` (without ``bin/`` and the manifest if text_only)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if not p.is_file() or p.name in SKIPPED:
            continue
        if text_only and (rel.startswith("bin/") or "/bin/" in rel or p.name == ".prep-files.json"):
            continue
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def strip_binaries(files: Dict[str, str]) -> Dict[str, str]:
    return {rel: h for rel, h in files.items()
            if not (rel.startswith("bin/") or "/bin/" in rel or rel.rsplit("/", 1)[-1] == ".prep-files.json")}


def run_case(name: str, data: Path, work: Path, text_only: bool = False) -> Dict[str, str]:
    """Run one case's prep (quietly) and return the digest of what it wrote."""
    from fairseq_compgen import prep

    argv = CASES[name]
    out = work / "out" / name
    if name == "russin":  # a SCAN split made by prep scan (with its dictionaries), then russin inside it
        split = work / "russin"
        if not (split / "addprim_jump" / "bin").is_dir():
            _quiet(prep.main, ["scan", "--split", "addprim_jump", "--out", str(split)])
        out = split / "addprim_jump" / "russin"
    filled = [a.format(data=data, out=out, work=work) for a in argv]
    if text_only and argv[0] not in NO_BINARIZE_OPTION:
        filled.append("--no-binarize")
    _quiet(prep.main, filled)
    return digest(out, text_only)


def _quiet(fn: Callable, argv: List[str]) -> None:
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            fn(argv)
    except BaseException:
        sys.stderr.write(buf.getvalue()[-3000:])
        raise


def prepare_inputs(data: Path, work: Path) -> None:
    _pcfg_inputs(data, work)
    _iwslt_inputs(data, work)


def compare(name: str, got: Dict[str, str], want: Dict[str, str]) -> List[str]:
    """The differences between a case's digest and the fixture's, one line each."""
    bad = [f"{name}: {rel} missing" for rel in sorted(set(want) - set(got))]
    bad += [f"{name}: {rel} not in the fixture" for rel in sorted(set(got) - set(want))]
    bad += [f"{name}: {rel} differs" for rel in sorted(set(got) & set(want)) if got[rel] != want[rel]]
    return bad


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the local copies")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path, help="write the fixture (the cases run; its other cases stay)")
    mode.add_argument("--check", type=Path, help="compare with the fixture")
    p.add_argument("--text-only", action="store_true", help="with --check: no binaries (--no-binarize)")
    p.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    data = args.data.resolve()
    fixture = json.loads(args.check.read_text(encoding="utf-8")) if args.check else None
    results, bad = {}, []
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="prep-golden-") as tmp:
        work = Path(tmp)
        prepare_inputs(data, work)
        for name in args.cases:
            t = time.time()
            got = run_case(name, data, work, text_only=args.text_only)
            print(f"{name}: {len(got)} files, {time.time() - t:.1f} s", flush=True)
            results[name] = {"argv": CASES[name], "files": got}
            if fixture is not None:
                want = fixture["cases"][name]["files"]
                bad += compare(name, got, strip_binaries(want) if args.text_only else want)
    if args.record:  # the cases run replace theirs; the fixture's other cases stay (--cases records a few)
        from fairseq_compgen.data.io import atomic_write_text

        cases = json.loads(args.record.read_text(encoding="utf-8"))["cases"] if args.record.is_file() else {}
        earlier = json.loads(args.record.read_text(encoding="utf-8")).get("recorded_at") if cases else None
        cases = {name: case for name, case in cases.items() if name in CASES}  # a case no longer defined goes
        for case in cases.values():  # a fixture written before each case named its commit
            case.setdefault("recorded_at", earlier)
        cases.update({name: {**r, "recorded_at": commit} for name, r in results.items()})
        atomic_write_text(args.record, json.dumps({"script": "scripts/prep_golden.py", "cases": cases}, indent=1,
                                                  sort_keys=True) + "\n")
        print(f"wrote {args.record} ({sum(len(r['files']) for r in results.values())} files of {len(results)} cases "
              f"recorded at {commit[:12]}; {len(cases)} cases in all)")
        return 0
    for line in bad:
        print(line)
    print("identical" if not bad else f"{len(bad)} difference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
