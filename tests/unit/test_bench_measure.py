"""The benchmark's memory sampler: the peak of a process tree's PSS, read without taking a core from it."""

from __future__ import annotations

import subprocess
import sys
import time

from benchmarks.measure import MIB, TreeSampler

# A child that holds 200 MiB of its own pages for a while, then a grandchild of 100 MiB more beside it.
HOLDER = """
import subprocess, sys, time
held = bytearray(200 * 1024 * 1024)
for i in range(0, len(held), 4096):
    held[i] = 1
time.sleep(1.5)
child = subprocess.Popen([sys.executable, "-c", '''
import time
more = bytearray(100 * 1024 * 1024)
for i in range(0, len(more), 4096):
    more[i] = 1
time.sleep(1.5)
'''])
child.wait()
time.sleep(0.5)
"""


def test_the_peak_counts_the_whole_tree_and_pss_is_read_far_less_often_than_rss() -> None:
    process = subprocess.Popen([sys.executable, "-c", HOLDER])
    with TreeSampler([process.pid], interval_s=0.05, pss_interval_s=1.0) as sampler:
        process.wait(timeout=60)
        time.sleep(0.2)

    assert process.returncode == 0
    # Both holders' pages (with two interpreters' own) at once, and not counted twice.
    assert 300 * MIB < sampler.peak < 420 * MIB
    assert max(sampler.peak_by_name.values()) > 300 * MIB  # both holders are the same program
    assert sampler.samples >= 40
    assert sampler.pss_readings < sampler.samples / 2


def test_a_tree_that_never_grows_is_read_once_a_second() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2.5)"])
    try:
        started = time.monotonic()
        with TreeSampler([process.pid], interval_s=0.02, pss_interval_s=1.0) as sampler:
            time.sleep(2.0)
        elapsed = time.monotonic() - started
    finally:
        process.kill()
        process.wait()

    assert sampler.samples >= 50
    # The first reading, then one a second: a reading more for each RSS high (an interpreter's start).
    assert 2 <= sampler.pss_readings <= elapsed + 6
    assert 1 * MIB < sampler.peak < 100 * MIB


def test_a_slow_climb_is_read_at_its_larger_steps_not_on_every_tick() -> None:
    sampler = TreeSampler(interval_s=0.05, pss_interval_s=1.0)
    # RSS climbs 4 MiB a tick for 100 ticks (5 s at 50 ms), as on a machine slow to fault pages in.
    due = [sampler.pss_due((1 + 4 * tick) * MIB, tick * 0.05) for tick in range(100)]
    assert due[0]
    # Reads come from the rise (every 16 MiB, later every 5%) and from the one-second interval.
    assert 12 <= sum(due) <= 30


def test_a_small_rise_waits_for_the_interval_and_a_large_one_is_read_at_once() -> None:
    sampler = TreeSampler(interval_s=0.05, pss_interval_s=1.0)
    assert sampler.pss_due(1000 * MIB, 0.0)
    assert not sampler.pss_due(1040 * MIB, 0.05)  # 4% above the high read
    assert not sampler.pss_due(1040 * MIB, 0.95)
    assert sampler.pss_due(1040 * MIB, 1.0)
    assert sampler.pss_due(1100 * MIB, 1.05)  # 5.8% above
    assert sampler.pss_readings == 3
