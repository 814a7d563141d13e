"""The training clocks (tasks/clocks.py) and how train_log adds them up: the process's CPU time `cpu_s`, and
fairseq's `wall`, which a resumed invocation used to log as 0 throughout."""
import time

from fairseq.logging import metrics

from fairseq_compgen.pipelines import train_log
from fairseq_compgen.tasks.clocks import CPU_KEY, log_clocks


def test_a_resumed_wall_stopwatch_is_started_again_and_the_cpu_clock_is_logged():
    metrics.reset()
    metrics.log_start_time("wall", priority=790, round=0)  # as fairseq's Trainer does when it is built
    saved = metrics.state_dict()  # as the checkpoint keeps it
    metrics.reset()
    metrics.load_state_dict(saved)  # as a resume restores it
    wall = metrics.get_meter("default", "wall")
    time.sleep(0.02)
    assert wall.elapsed_time == 0.0  # fairseq 0.12: restored stopped; every summary would say `wall 0`
    log_clocks()
    time.sleep(0.02)
    assert wall.elapsed_time >= 0.02
    started = wall.start_time
    log_clocks()  # a running stopwatch is left alone
    assert wall.start_time == started
    with metrics.aggregate("train") as epoch:  # as fairseq's train loop aggregates an epoch's summary
        log_clocks()
        before = time.process_time()
        sum(i * i for i in range(200_000))  # some CPU time
        log_clocks()
        cpu = epoch.get_smoothed_value(CPU_KEY)
    assert round(before, 1) <= cpu <= time.process_time() + 0.1  # the latest value, not the steps' average
    metrics.reset()


def _summary(stamp: str, updates: int, wall: float, cpu=None) -> str:
    cpu_part = f', "train_cpu_s": "{cpu}"' if cpu is not None else ""
    return (f'{stamp} | INFO | train | {{"epoch": 1, "train_loss": "2", "train_num_updates": "{updates}", '
            f'"train_train_wall": "1"{cpu_part}, "train_wall": "{wall}"}}\n')


def test_train_wall_reads_a_stuck_resumed_clock_from_the_timestamps_and_train_cpu_adds_up(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(
        "# 2026-01-01T10:00:00 sweep: fairseq-compgen train ...\n"
        + _summary("2026-01-01 10:01:40", 65, 95, cpu=90) + _summary("2026-01-01 10:03:20", 130, 195, cpu=180)
        + "# 2026-01-01T11:00:00 sweep: fairseq-compgen train ... (resumed)\n"  # logged `wall 0` throughout
        + _summary("2026-01-01 11:05:00", 195, 0, cpu=250.5) + _summary("2026-01-01 11:10:00", 260, 0, cpu=500))
    # 195 s of the first invocation's clock, then 10 minutes between the resumed one's start and last summary
    assert train_log.train_wall(log) == 195 + 600
    assert train_log.train_cpu(log) == 180 + 500
    # a log whose first invocation predates cpu_s: no CPU total (not a part of one), the wall clock as before
    old = tmp_path / "old.log"
    old.write_text("# 2026-01-01T10:00:00 sweep: ...\n" + _summary("2026-01-01 10:03:20", 130, 195)
                   + "# 2026-01-01T11:00:00 sweep: ...\n" + _summary("2026-01-01 11:10:00", 260, 7, cpu=500))
    assert train_log.train_cpu(old) is None and train_log.train_wall(old) == 195 + 7
    # the records carry their lines' timestamps
    times = [r.time.isoformat() for r in train_log.read_records(log)]
    assert times[0] == "2026-01-01T10:00:00" and times[-1] == "2026-01-01T11:10:00"
