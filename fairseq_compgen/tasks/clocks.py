"""The training clocks in train.log: the process's CPU time (`cpu_s`), and fairseq's `wall` kept running on resuming.

**`cpu_s`.** fairseq's `wall` (in every training summary) is wall-clock time, so a run whose process was paused
(SIGSTOP, as the campaign's lanes are while a benchmark or the test suite runs) or shared its cores looks slower than
it was. After every training step the tasks of this package log `cpu_s`: the CPU seconds this process has used so
far, all its threads (time.process_time(): user + system), start-up, validation and checkpointing included; a paused
process uses none. It is logged with weight 0, which fairseq's AverageMeter shows as the latest value, so each
summary (`train_inner` and the epoch's `train` line) shows the clock at its last step. It starts again at 0 when a
run resumes (`pipelines/train_log.train_cpu` adds up the invocations). With torchrun the log shows rank 0's process.

**`wall` after a resume.** fairseq 0.12 saves the `wall` stopwatch in the checkpoint's metrics and restores it
stopped (StopwatchMeter.load_state_dict leaves no start time), so every summary of a resumed invocation says
`wall 0`. At its first training step such an invocation's stopwatch is started again: its `wall` then counts from
that step (the loading before it, a few seconds, is not counted). Logs written before this fix keep their zeros;
`pipelines/train_log.train_wall` reads those invocations' duration from the lines' timestamps.
"""
import time

from fairseq.logging import metrics

CPU_KEY = "cpu_s"


def log_clocks() -> None:
    """After a training step: start fairseq's `wall` stopwatch if a resume left it stopped, and log this process's
    CPU seconds so far as `cpu_s` into the active aggregators."""
    wall = metrics.get_meter("default", "wall")
    if wall is not None and getattr(wall, "start_time", 0) is None:  # restored from a checkpoint, never started
        wall.start()
    metrics.log_scalar(CPU_KEY, time.process_time(), weight=0, priority=900, round=1)
