"""Every dataset's prep writes byte-identical text outputs to those recorded before the datasets became one module
each (fairseq_compgen/prep/): tests/fixtures/prep_golden.json, recorded by scripts/prep_golden.py on the local copies
in shared/data.

One case per dataset, text outputs only (``--no-binarize``: every file but ``bin/`` and the manifest), so that the
whole file runs in well under a minute on one core; the binaries, every variant of the fixture and russin (which
binarizes a SCAN split first) are checked by ``python scripts/prep_golden.py --check tests/fixtures/prep_golden.json``
(a few minutes)."""
import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
FIXTURE = REPO / "tests" / "fixtures" / "prep_golden.json"
CASES = ("scan_simple", "scan_length_cutoff_26_dict_all", "cogs", "cogs_tagging", "cfq_mcd1", "pcfg_productivity",
         "mathematics", "algorithmic", "noun_adj", "iwslt14", "flores_ne_en", "slog_varfree")
# the inputs each case reads from shared/data
NEEDS = {"scan_simple": "scan/simple_split", "cogs": "cogs/gen.tsv", "cogs_tagging": "cogs/gen.tsv",
         "cfq_mcd1": "cfq/mcd1_preprocessed/train.query.txt", "pcfg_productivity": "pcfg/productivity/test.src",
         "mathematics": "math/extrapolate", "noun_adj": "europarl/europarl-v7.fr-en.en",
         "iwslt14": "iwslt14/IWSLT14.TED.tst2012.de-en.de.xml", "flores_ne_en": "flores/wikipedia_en_ne_si_test_sets.tgz",
         "slog_varfree": "slog/generalization_sets.zip"}


def _golden():
    spec = importlib.util.spec_from_file_location("prep_golden", REPO / "scripts" / "prep_golden.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


golden = _golden()


@pytest.fixture(scope="module")
def fixture():
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    if not (SHARED_DATA / "pcfg").is_dir() or not (SHARED_DATA / "iwslt14").is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (expected shared/ as a sibling of the repo checkout)")
    work = tmp_path_factory.mktemp("golden")
    golden.prepare_inputs(SHARED_DATA, work)
    return work


def test_cases_cover_every_dataset(fixture):
    """The fixture has a case of every dataset `fairseq-compgen prep` lists, with its command as recorded."""
    from fairseq_compgen import prep

    assert {c["argv"][0] for c in fixture["cases"].values()} == set(prep.names())
    assert {name: case["argv"] for name, case in fixture["cases"].items()} == golden.CASES
    assert set(CASES) <= set(golden.CASES)


@pytest.mark.parametrize("case", CASES)
def test_text_outputs_are_byte_identical(case, fixture, work):
    need = SHARED_DATA / NEEDS.get(case, "scan/tasks.txt")
    if not need.exists():
        pytest.skip(f"shared data not found: {need}")
    got = golden.run_case(case, SHARED_DATA, work, text_only=True)
    want = golden.strip_binaries(fixture["cases"][case]["files"])
    assert got, f"{case} wrote nothing"
    assert golden.compare(case, got, want) == []


def test_a_changed_output_is_reported(fixture, work):
    """The comparison can fail: a file that differs, one missing and one more are each named."""
    got = golden.run_case("algorithmic", SHARED_DATA, work, text_only=True)
    want = dict(golden.strip_binaries(fixture["cases"]["algorithmic"]["files"]))
    changed = sorted(want)[0]
    want[changed] = "0" * 64
    missing = want.pop(sorted(want)[-1])
    assert missing
    bad = golden.compare("algorithmic", got, {**want, "extra.txt": "1" * 64})
    assert bad == ["algorithmic: extra.txt missing", f"algorithmic: {sorted(got)[-1]} not in the fixture",
                   f"algorithmic: {changed} differs"]
