"""Wall-clock timestamps derived from the monotonic clock, and the detection of a wall-clock step during a run.

Durations (a run's span, and so its throughput and cost) are computed from the records' ``sent_at`` times. Taken
from ``time.time()``, they would inherit every step of the system clock: an NTP correction or a manual change of
-1 h in the middle of a run would make the span an hour long. So ``sent_at`` is the wall time of one anchor read
when the process starts plus ``time.perf_counter()`` since then, which never steps. ``step_since`` measures how
far the system clock moved apart from that during a run, so the run can say so (a ``wall_clock_step`` finding):
its figures stand, but its start and end times are the monotonic clock's, not the stepped system clock's.
"""

from __future__ import annotations

import time

_WALL0 = time.time()
_MONO0 = time.perf_counter()

# On Linux, perf_counter is CLOCK_MONOTONIC, which NTP slews together with the system clock but never steps
# (clock_gettime(2)), so the two move apart only by steps; the allowance covers a platform whose monotonic
# clock is not slewed, at the kernel's largest slew rate, 500 microseconds per second (docs/reliability.md)
SLEW_PER_S = 0.0005
MIN_STEP_S = 1.0


def wall_now() -> float:
    """Seconds since the epoch, advancing with the monotonic clock from this process's anchor."""
    return _WALL0 + (time.perf_counter() - _MONO0)


def offset() -> float:
    """How far the system clock is from ``wall_now()`` now (positive: the system clock is ahead)."""
    return time.time() - wall_now()


def step_note(offset_at_start: float, elapsed_s: float) -> str | None:
    """A note when the system clock stepped during a run of ``elapsed_s`` monotonic seconds, else None."""
    step = offset() - offset_at_start
    if abs(step) <= MIN_STEP_S + SLEW_PER_S * elapsed_s:
        return None
    return (
        f"wall clock stepped by {step:+.1f} s during the run: durations come from the monotonic clock and are "
        "unaffected; the run's timestamps follow the monotonic clock, not the stepped system clock"
    )
