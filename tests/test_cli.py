"""The `fairseq-compgen` command and the recipes: recipes as data give exactly the fairseq-train commands the
removed bash scripts gave, recipe-file errors name the file and line, `fairseq-compgen --help` imports neither fairseq
nor torch, the sweep refuses a run whose recipe changed, and every subcommand answers --help."""
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fairseq_compgen import cli, recipes
from fairseq_compgen.errors import UsageError
from fairseq_compgen.pipelines import sweep

FIXTURES = Path(__file__).resolve().parent / "fixtures"
OLD = json.loads((FIXTURES / "old_train_commands.json").read_text())
# the one deliberate change: the recipes log JSON (fairseq's --log-format json) for the aggregator and dashboards
CHANGED = {"--log-format": ("simple", "json")}


def _options(args, once=True):
    """fairseq-train arguments -> (DATA, {--option: value or True}), the last occurrence winning as in fairseq;
    once: every option appears once."""
    data, out, i = args[0], {}, 1
    while i < len(args):
        assert args[i].startswith("--") and not (once and args[i] in out), (args[i], args)
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[args[i]], i = args[i + 1], i + 2
        else:
            out[args[i]], i = True, i + 1
    return data, out


def _same(a, b):
    try:
        return float(a) == float(b)  # "1e-3" and "0.001" are the same --lr
    except (TypeError, ValueError):
        return a == b


def _data_folder(root: Path, tagging: bool) -> Path:
    root.mkdir(parents=True)
    (root / "dict.src.txt").write_text("a 1\n")
    for subset in ("train", "valid", "test", "gen"):
        (root / (f"{subset}.parent" if tagging else f"{subset}.src-tgt.src.idx")).write_text("")
    return root


@pytest.mark.parametrize("name", sorted(k for k in OLD if not k.startswith("_")))
def test_dry_run_equals_the_removed_scripts_command(name, tmp_path, capsys):
    data = _data_folder(tmp_path / "d", tagging=name.endswith("tagging"))
    # a registered arch of the recipe's task (a dry run checks it and every option as fairseq-train's parser does),
    # written ARCH again for the comparison with the removed scripts' commands
    arch = "-" if name.startswith("russin") else "compgen_tagger" if name.endswith("tagging") else "compgen_transformer"
    assert cli.main(["train", "--recipe", name, arch, str(data), "SAVE", "--dry-run"]) == 0
    printed = shlex.split(capsys.readouterr().out)
    assert printed[0] == "fairseq-train"
    new = [a.replace(str(data), "DATA").replace(str(recipes.PACKAGE), "USER_DIR") for a in printed[1:]]
    new = ["ARCH" if a == arch else a for a in new]
    (old_data, old), (new_data, now) = _options(OLD[name], once=False), _options(new)
    assert old_data == new_data == "DATA"
    differ = {k: (old.get(k), now.get(k)) for k in set(old) | set(now) if not _same(old.get(k), now.get(k))}
    assert differ == CHANGED, name


def test_extra_flags_come_last_and_launch_flags_are_added(tmp_path, capsys):
    data = _data_folder(tmp_path / "d", tagging=False)
    arch = "compgen_transformer_scan"
    cli.main(["train", "--recipe", "csordas/scan", "--gpus", "4", arch, str(data), "s", "--lr", "5e-4", "--dry-run"])
    args = shlex.split(capsys.readouterr().out)
    assert args[-4:] == ["--lr", "5e-4", "--distributed-world-size", "4"] and args.count("--lr") == 2
    cli.main(["train", "--recipe", "csordas/scan", "--cpu", "--nprocs", "2", arch, str(data), "s", "--dry-run"])
    args = shlex.split(capsys.readouterr().out)
    assert args[1:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m"]
    assert "--cpu-dist" in args and args[-1] == "--cpu"


def test_a_dry_run_checks_the_arch_and_fairseqs_options(tmp_path, capsys):
    """`train --dry-run` printed any command, a typo in a fairseq-train flag or the arch included (new-user
    walkthrough, 2026-11-29); it now refuses what fairseq-train would, in one line, and prints nothing."""
    data = _data_folder(tmp_path / "d", tagging=False)
    with pytest.raises(UsageError, match=r"--arch 'compgen_transformer_sacn' is not registered"):
        cli.main(["train", "--recipe", "csordas/scan", "compgen_transformer_sacn", str(data), "s", "--dry-run"])
    with pytest.raises(UsageError, match=r"^fairseq-train: unrecognized arguments: --max-updates 10"):
        cli.main(["train", "--recipe", "csordas/scan", "compgen_transformer_scan", str(data), "s", "--dry-run",
                  "--max-updates", "10"])
    assert capsys.readouterr().out == ""
    assert not (tmp_path / "s").exists()


def test_noam_recipes_compute_the_peak_lr():
    assert recipes.noam_peak(0.9, 128, 4000) == pytest.approx(0.9 / (128 * 4000) ** 0.5)
    assert recipes.get("csordas/cfq").options["lr"] == {"noam": [0.9, 128.0, 4000.0]}


def test_every_recipe_names_a_paper_and_a_registered_arch():
    from fairseq_compgen.models.standalone import compgen_archs, tagger_archs

    archs = set(compgen_archs()) | set(tagger_archs())
    for name in recipes.names():
        r = recipes.get(name)
        assert r.paper and r.arch in archs, name


@pytest.mark.parametrize("text, error", [
    ("a:\n  options: {adam-betas: (0.9, 0.98)}\n", r"recipes.yaml:1: recipe 'a': '0.98\)' is not a fairseq-train option"),
    ("a:\n  paper: x\nb:\n  extends: c\n", r"recipes.yaml:3: recipe 'b' extends unknown recipe 'c'"),
    ("a:\n  opts: {lr: 1}\n", r"recipes.yaml:1: recipe 'a': expected a mapping with keys among"),
    ("a:\n  options: {lr: [1, 2]}\n", r"recipes.yaml:1: recipe 'a': option 'lr': expected a value"),
])
def test_recipe_file_errors_name_the_file_and_line(tmp_path, text, error):
    path = tmp_path / "recipes.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=error):
        recipes._load(path)


def test_unknown_recipe_lists_the_known_ones():
    with pytest.raises(UsageError, match=r"unknown recipe 'csordas/sacn' \(known: chaabouni/iwslt14, "):
        recipes.get("csordas/sacn")
    with pytest.raises(UsageError, match="unknown recipe '_csordas'"):  # bases are not offered
        recipes.get("_csordas")


def test_compgen_help_starts_without_fairseq_or_torch():
    code = ("import sys; from fairseq_compgen import cli; cli.main(['--help']); cli.main(['recipes']); "
            "cli.main(['recipes', 'csordas/cfq']); "
            "print(sorted(m for m in ('fairseq', 'torch') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith("[]"), p.stdout
    assert "fairseq-compgen prep DATASET" in p.stdout and "csordas/cfq" in p.stdout
    assert "--lr noam peak 0.0012577882373436316 = 0.9 / sqrt(128 * 4000)" in p.stdout


def test_unknown_subcommand_is_one_line():
    p = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "trian"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        f"fairseq-compgen: error: unknown subcommand 'trian' (known: {', '.join(cli.COMMANDS)}; fairseq-compgen --help)"]


def test_a_closed_pipe_ends_quietly():
    """`fairseq-compgen prep --help | head -1`: the reader is gone before the help is written; no traceback."""
    p = subprocess.Popen([sys.executable, "-m", "fairseq_compgen.cli", "prep", "--help"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdout.close()  # before the child has imported anything, so its first write meets a closed pipe
    err = p.stderr.read()
    assert p.wait() == 1 and err == "", err


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_subcommand_answers_help(command, capsys):
    try:
        rc = cli.main([command, "--help"])
    except SystemExit as e:  # argparse's --help
        rc = e.code
    assert rc == 0 and capsys.readouterr().out.strip()


def test_a_sweep_refuses_a_run_whose_recipe_changed(tmp_path, monkeypatch):
    """A run folder remembers its recipe's options: after an edit of recipes.yaml (here: another lr) its runs are
    refused instead of resumed under the old name with other hyperparameters."""
    data = _data_folder(tmp_path / "d", tagging=False)
    spec = {"name": "s", "datasets": {"d": {"data": str(data), "recipe": "csordas/scan"}},
            "configurations": {"c": {"arch": "rel_uni_transformer_{recipe}"}}}
    (run,) = sweep.plan(spec, tmp_path / "out")
    assert run.arch == "rel_uni_transformer_scan" and run.settings()["recipe_options"]["lr"] == "1e-3"
    run.path.mkdir(parents=True)
    (run.path / sweep.SETTINGS).write_text(json.dumps(run.settings()))
    assert run.changed_settings() == []
    edited = recipes.Recipe(**{**recipes.get("csordas/scan").__dict__,
                               "options": {**recipes.get("csordas/scan").options, "lr": "5e-4"}})
    monkeypatch.setattr(recipes, "get", lambda name: edited)
    (change,) = run.changed_settings()
    assert change.startswith("recipe_options: {") and "'lr': '1e-3'" in change and "'lr': '5e-4'" in change


def test_a_sweep_takes_a_run_moved_from_another_machine_only_with_the_same_data(tmp_path):
    """A run folder whose settings name another machine's data folder (carried, or begun on a lent GPU) is this run
    when this run's data folder holds the files of its data.json, whatever the path, and not when a file differs or
    when it has no data.json; any other changed setting still counts."""
    from fairseq_compgen.pipelines.train import data_fingerprint

    data = _data_folder(tmp_path / "d", tagging=False)
    spec = {"name": "s", "datasets": {"d": {"data": str(data), "recipe": "csordas/scan"}},
            "configurations": {"c": {"arch": "rel_uni_transformer_{recipe}"}}}
    (run,) = sweep.plan(spec, tmp_path / "out")
    run.path.mkdir(parents=True)
    (run.path / sweep.SETTINGS).write_text(json.dumps(dict(run.settings(), data="/gpu/main/data/scan/bin")))
    (change,) = run.changed_settings()  # no data.json: nothing tells that it is the same data
    assert change == f"data: '/gpu/main/data/scan/bin' -> {str(data)!r}"
    (run.path / "data.json").write_text(json.dumps(data_fingerprint(data)))
    assert run.changed_settings() == []
    (data / "dict.src.txt").write_text("a 2\n")  # the data folder here holds other files
    assert run.changed_settings() == [change]
    (data / "dict.src.txt").write_text("a 1\n")
    (run.path / sweep.SETTINGS).write_text(json.dumps(dict(run.settings(), data="/gpu/main/data/scan/bin", seed=7)))
    assert len(run.changed_settings()) == 2


def test_gpu_runs_a_cpu_sweeps_runs_as_the_same_runs(tmp_path):
    """--gpu drops a sweep file's `launch: {cpu: true}` (a CPU campaign's runs on a lent GPU): no --cpu in the train
    or eval command, and the settings, which decide whether a run folder is this run, are those of the CPU plan."""
    data = _data_folder(tmp_path / "d", tagging=False)
    spec = {"name": "s", "launch": {"cpu": True}, "datasets": {"d": {"data": str(data), "recipe": "csordas/scan"}},
            "configurations": {"c": {"arch": "rel_uni_transformer_{recipe}"}}}
    (on_cpu,) = sweep.plan(spec, tmp_path / "out")
    (on_gpu,) = sweep.plan(spec, tmp_path / "out", gpu=True)
    assert "--cpu" in on_cpu.train_command() and "--cpu" in on_cpu.eval_command()
    assert "--cpu" not in on_gpu.train_command() and "--cpu" not in on_gpu.eval_command()
    assert on_gpu.settings() == on_cpu.settings()
    # --decode-cpu (the GPU one-shot): trains on the GPU, evaluates on CPU, still the same run
    (split,) = sweep.plan(spec, tmp_path / "out", gpu=True, decode_cpu=True)
    assert "--cpu" not in split.train_command() and "--cpu" in split.eval_command()
    assert split.settings() == on_cpu.settings()
    with pytest.raises(UsageError, match="--cpu and --gpu"):
        sweep.plan(spec, tmp_path / "out", cpu=True, gpu=True)


def test_an_unknown_arch_is_one_line(tmp_path):
    data = _data_folder(tmp_path / "d", tagging=False)
    (data / "train.src-tgt.src.idx").write_text("")
    p = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "train", "--recipe", "csordas/scan", "--cpu",
                        "rel_uni_transformer_sacn", str(data), str(tmp_path / "run")], capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1] == (
        "fairseq_compgen: error: --arch 'rel_uni_transformer_sacn' is not registered (fairseq-compgen help lists them)")
    assert not (tmp_path / "run").exists()


def test_aggregate_defaults_to_the_metric_the_sweep_evaluates_with():
    from fairseq_compgen.pipelines.aggregate import default_metric

    assert default_metric({"datasets": {"scan": {}}}) == "accuracy"
    assert default_metric({"datasets": {"iwslt": {"metric": "bleu"}, "wmt": {"metric": "bleu"}}}) == "bleu"
    with pytest.raises(UsageError, match=r"different metrics \(accuracy, comp\): choose one with --metric"):
        default_metric({"datasets": {"scan": {"metric": "exact_match"}, "na": {"metric": "comp"}}})


def test_a_sweep_refuses_an_unknown_metric(tmp_path):
    data = _data_folder(tmp_path / "d", tagging=False)
    path = tmp_path / "s.yaml"
    path.write_text(f"datasets:\n  d:\n    data: {data}\n    metric: blue\n"
                    "configurations:\n  c:\n    arch: rel_uni_transformer\n")
    with pytest.raises(UsageError, match="dataset 'd': metric 'blue' is not one of exact_match, bleu, cfq_sparql, comp"):
        sweep.run_sweep(path, tmp_path / "out", dry_run=True, echo=lambda s: None)


def test_aggregate_reads_a_sweep_made_before_the_recipes(tmp_path):
    """A sweep.json of the bash-script era (runs with `preset`, no recorded settings) still aggregates: its runs'
    done.json settings are compared with what that version planned, not with today's Run fields."""
    from fairseq_compgen.pipelines import pooling

    run = {"dataset": "scan", "config": "c", "seed": 1, "arch": "a", "data": "/d", "dir": str(tmp_path / "r"),
           "preset": "scan", "flags": ["--lr", "1e-3"], "subsets": ["gen"], "launch": ["--cpu"],
           "generate_flags": "--cpu"}
    old_settings = {"arch": "a", "data": "/d", "preset": "scan", "flags": ["--lr", "1e-3"], "subsets": ["gen"],
                    "generate_flags": "", "seed": 1}
    (tmp_path / "r" / "eval").mkdir(parents=True)
    (tmp_path / "r" / "eval" / "gen.json").write_text(json.dumps({"n": 4, "correct": 3, "accuracy": 0.75}))
    (tmp_path / "r" / "done.json").write_text(json.dumps({"settings": old_settings}))
    (tmp_path / "sweep.json").write_text(json.dumps({"spec": {"name": "old", "datasets": {"scan": {}},
                                                              "configurations": {"c": {}}}, "runs": [run]}))
    _, _, cells = pooling.collect(tmp_path)
    assert cells["scan", "gen", "c"].values == {1: 0.75}
    (tmp_path / "r" / "done.json").write_text(json.dumps({"settings": {**old_settings, "arch": "b"}}))
    _, _, cells = pooling.collect(tmp_path)
    assert cells["scan", "gen", "c"].values == {}  # made with another arch: left out, as before


def test_the_installed_command_runs_from_bash():
    """The console script is `fairseq-compgen`, not `compgen`: bash runs its builtin `compgen` (the completion
    generator) before any program on PATH, so `compgen train ...` silently did nothing and exited 0."""
    bindir = Path(sys.executable).parent
    p = subprocess.run(["bash", "-c", f'PATH="{bindir}:$PATH"; type -t compgen; fairseq-compgen recipes'],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "builtin" and "csordas/scan" in p.stdout


def test_early_stopping_takes_the_later_of_tied_best_validations(tmp_path):
    """fairseq rewrites checkpoint_best.pt when the metric is >= the best so far: a tie goes to the later update."""
    from fairseq_compgen.pipelines import curves

    logged = {"valid": {1000: 0.9, 2000: 1.0, 3000: 0.95, 4000: 1.0}, "test": {1000: 0.8, 2000: 0.9, 3000: 0.85,
                                                                         4000: 0.97}}
    assert curves.at_best(logged, "valid") == (4000, {"valid": 1.0, "test": 0.97})
    assert curves.at_best(logged, "gen") is None
    log = "".join(f'2026-01-01 00:00:00 | INFO | {s} | {{"epoch": 1, "{s}_accuracy": "{v}", "{s}_num_updates": "{u}"}}\n'
                  for u in sorted(logged["valid"]) for s, c in logged.items() for v in [c[u]])
    run = tmp_path / "r"
    run.mkdir()
    (run / "train.log").write_text(log)
    (run / "done.json").write_text("{}")
    spec = {"datasets": {"d": {"label": "D"}}, "configurations": {"c": {"label": "C"}}}
    md = curves.early_stopping_table(spec, [{"dataset": "d", "config": "c", "seed": 3, "dir": str(run)}],
                                     "valid", "accuracy", scale=100, digits=1)
    assert "| D | C | 3 | 4,000 | 100.0 | 97.0 |" in md and "update (best valid) | valid | test |" in md


def test_no_tensorboardx_notice():
    """tensorboardX is a core dependency (pyproject.toml): importing fairseq.tasks, as every command does, no longer
    logs fairseq's "Please install tensorboardX", and --tensorboard-logdir works out of the box."""
    said = subprocess.run([sys.executable, "-c", "import fairseq.tasks, tensorboardX"], capture_output=True, text=True)
    assert said.returncode == 0, said.stderr
    assert "Please install tensorboardX" not in said.stdout + said.stderr
