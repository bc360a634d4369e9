"""Aggregate throughput intervals: requests resampled together with the time they occupied (Little's law).

The point estimate is unchanged: X = T / W, all output tokens over the wall time (last end - first send; for
one prompt class of a mixed closed-loop level, W = S / concurrency). Write it as

    X = L * T / S      S = sum of the requests' e2e (request-seconds of load),  L = S / W

where L is the mean number of requests in flight over the wall (Little's law: L = arrival rate x mean time in
the system). L is the load the experimenter applied (a closed loop holds it at the concurrency, less the
drain at the end), so the interval holds it fixed; what a run measures with sampling error is T / S, how fast
the service turns a request-second of load into tokens (the e2e-weighted mean of the requests' own rates).
A bootstrap resample of requests (tokens_i, e2e_i) gives X* = L * T* / S*: centred on the point, and as wide
as the requests' rates vary, which they do whenever their durations differ, equal output lengths or not.

The old interval resampled token counts over a fixed W: with every output of one length (``ignore_eos``, the
built-in prompt sets) every resample had the same T and the interval had zero width.

$/M tokens is a decreasing function of throughput (price / throughput), so its interval is the throughput
interval's bounds mapped and swapped; the speedup of throughput (speculative / baseline) is also the cost
ratio (baseline $/M / speculative $/M): both variants run at one price.
"""

from __future__ import annotations

import warnings
from typing import Any

from spectrn.analyze.stats import BOOT_RESAMPLES, percentile_interval, replicates, rng, subsample
from spectrn.run.summary import Interval


def in_flight(e2e: Any, wall: float) -> float:
    """L = sum(e2e) / wall: the mean number of requests in flight (0 without a wall)."""
    import numpy as np

    return float(np.nansum(e2e)) / wall if wall > 0 else 0.0


def aggregate_ci(tokens: Any, e2e: Any, wall: float, *, seed: int, resamples: int = BOOT_RESAMPLES) -> Interval | None:
    """95% interval of the aggregate throughput ``sum(tokens) / wall``: L x T* / S* over resampled requests.

    Above ``BOOT_MAX_REQUESTS`` requests the resampling runs on a seeded sub-sample (as every bootstrap here),
    which widens the interval: conservative, never narrower than the full sample's."""
    reps = aggregate_replicates(tokens, e2e, wall, seed=seed, resamples=resamples)
    return None if reps is None else percentile_interval(reps, resamples)


def aggregate_replicates(tokens: Any, e2e: Any, wall: float, *, seed: int, resamples: int = BOOT_RESAMPLES) -> Any:
    """The bootstrap values L x T* / S* behind ``aggregate_ci`` (None: fewer than 2 requests or no load)."""
    import numpy as np

    t, d = np.asarray(tokens, dtype=float), np.asarray(e2e, dtype=float)
    load = in_flight(d, wall)
    if t.size < 2 or load <= 0:
        return None
    sel = subsample(t.size, seed)
    ts, ds = t[sel], d[sel]
    with np.errstate(invalid="ignore", divide="ignore"):
        return replicates(lambda i: load * ts[i].sum(axis=-1) / ds[i].sum(axis=-1), ts.size, seed=seed,
                          resamples=resamples)  # fmt: skip


def ratio_ci(
    num: tuple[Any, Any, float],
    den: tuple[Any, Any, float],
    *,
    paired: bool,
    seed: int,
    resamples: int = BOOT_RESAMPLES,
) -> Interval | None:
    """95% interval of aggregate throughput num / den, each given as (tokens, e2e, L): the requests to resample
    and the load in flight L of its whole run (``in_flight``), so that L x sum(tokens) / sum(e2e) is its point.

    ``paired``: num and den are the same requests in the same order (the same schedule index in both
    variants), resampled together, as every paired speedup. Otherwise each side is resampled on its own
    (llmperf runs, or two different runs): independent index matrices from one seeded generator."""
    reps = ratio_replicates(num, den, paired=paired, seed=seed, resamples=resamples)
    return None if reps is None else percentile_interval(reps, resamples)


def ratio_replicates(
    num: tuple[Any, Any, float],
    den: tuple[Any, Any, float],
    *,
    paired: bool,
    seed: int,
    resamples: int = BOOT_RESAMPLES,
) -> Any:
    """The bootstrap values behind ``ratio_ci`` (None: too few requests or no load)."""
    import numpy as np

    (tn, dn, ln), (td, dd, ld) = num, den
    tn, dn, td, dd = (np.asarray(x, dtype=float) for x in (tn, dn, td, dd))
    if not (ln > 0 and ld > 0):
        return None
    if paired:
        if tn.size != td.size or tn.size < 2:
            return None
        sel = subsample(tn.size, seed)
        tn, dn, td, dd = tn[sel], dn[sel], td[sel], dd[sel]

        def stat(rows: Any) -> Any:
            i = rows
            return (ln * tn[i].sum(axis=-1) / dn[i].sum(axis=-1)) / (ld * td[i].sum(axis=-1) / dd[i].sum(axis=-1))

        n = tn.size
    else:
        if tn.size < 2 or td.size < 2:
            return None
        sn, sd = subsample(tn.size, seed), subsample(td.size, seed + 1)
        tn, dn, td, dd = tn[sn], dn[sn], td[sd], dd[sd]
        gen = rng(seed + 99)

        def stat(rows: Any) -> Any:  # rows only sets how many resamples: each side draws its own indices
            a = gen.integers(0, tn.size, (rows.shape[0], tn.size))
            b = gen.integers(0, td.size, (rows.shape[0], td.size))
            return (ln * tn[a].sum(axis=-1) / dn[a].sum(axis=-1)) / (ld * td[b].sum(axis=-1) / dd[b].sum(axis=-1))

        n = max(tn.size, td.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resample of zero-length requests: NaN, dropped
        return replicates(stat, n, seed=seed, resamples=resamples)
