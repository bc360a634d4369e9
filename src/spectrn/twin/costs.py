"""Step costs fitted to step durations: the simulator's roofline by robust least squares (pure; numpy).

Each usable step (``spectrn.twin.steps``) gives one equation. With ``b`` sequences decoded, ``C`` their context
tokens, ``k`` draft passes and ``t`` positions verified per sequence (``spectrn.windows``; ``k = 0, t = 1``
without speculation), ``n`` prefills of ``P`` prompt tokens in the step:

    duration = decode * (k * (draft_run_s + draft_kv_read_per_token_s * C) + target)
             + prefill * (prefill_base_s + prefill_per_token_s * P)
    target   = weights_read_s + kv_read_per_seq_s * b + kv_read_per_token_s * C       memory bound
             | compute_per_token_s * b * t                                            compute bound

which is ``spectrn.sim.model``'s cost model (the draft taken as memory bound).

The client's clock sees each step end late by how long it took to read the event, so one step's duration
carries the difference of two such delays (a few milliseconds on a busy machine: tens of percent of a step).
Consecutive usable steps are therefore summed into segments (up to ``SEGMENT_STEPS``): a segment's duration
is the difference of two step ends, so the delays of the steps inside it cancel, and its equation is the sum
of its steps' equations. Given which steps are compute bound, the equations are linear in the eight
parameters. The regimes are found by profiling: the candidates are the masks with no step and with every decode
step compute bound (the answer where every one is: slopes just below the top quantile miss it), and one for each
slope just above a quantile of the memory-only mask's ridge. From a mask every term its design separates is
fitted, at 0 or above (compute-bound steps can separate a term the memory-bound ones cannot: the draft's runs
from the weights read where every step speculates), a term it does not is held at 0 (so every mask, the
memory-only one too, is scored on the columns it spans, not on priors), the fit reassigns the regimes (a step
within rounding of the ridge keeps its own), and so on until the mask repeats: a fixed
point, or a cycle, whose state with the smallest residual is taken (``MAX_ROUNDS`` at most; then the best state
seen). A candidate is scored by the residual of the mask it ends with; then the masks next to the best one on
its own fit's ridge (``REFINE`` thresholds either side of its slope, each between two distinct values: steps
alike share a regime) are tried the same way until the best stays. Equal residuals (to rounding) go to the mask
with fewer compute-bound steps, then to the one whose compute-bound steps come first, so that masks scored equal
are chosen between by what they are rather than by the order they were found in. The best must cut the residual by
``MIN_GAIN`` at least, with at least ``MIN_COMPUTE_STEPS`` compute-bound steps, a positive compute slope and a
weights term above rounding where the mask determines it, and a last fit with its mask gives the costs (a term
the mask does not separate at its prior; a slope that fit makes negative discards the regime). Fits are
Huber-weighted (iteratively reweighted least squares), so the rare step stretched by a stalled client or server
barely moves them; standard errors come from the weighted normal equations with the residual scale.
A term the fit wants negative is fixed at 0 (the data say it is absent) and the rest refitted.

A parameter the data cannot separate from the others (its column lies in the span of the rest: e.g. one
prompt length for the prefill slope, no speculative step for the draft terms), under the compute regime taken,
keeps its prior value and says so: that includes a term the regime leaves without data (the memory terms, where
every decode step is compute bound). A compute slope without a single compute-bound step is not identified either: all
steps being memory bound only bounds it from above, and the prior (or that bound, whichever is smaller) is
used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from spectrn.twin.steps import Step

PARAMS = (
    "weights_read_s",
    "kv_read_per_seq_s",
    "kv_read_per_token_s",
    "compute_per_token_s",
    "draft_run_s",
    "draft_kv_read_per_token_s",
    "prefill_base_s",
    "prefill_per_token_s",
)
# When a column is not separable from the others, the first of these that is still free goes back to its prior.
DROP_ORDER = (
    "prefill_per_token_s",
    "draft_kv_read_per_token_s",
    "kv_read_per_token_s",
    "kv_read_per_seq_s",
    "draft_run_s",
    "prefill_base_s",
    "weights_read_s",
)
SEGMENT_STEPS = 32  # consecutive decode steps of one batch size summed into one equation
MIN_COMPUTE_STEPS = 10  # fewer compute-bound steps than this do not identify the compute slope
MIN_GAIN = 0.05  # a compute regime must cut the residual sum of squares by this share to be believed
HUBER_K = 1.345
REFINE = 12  # thresholds tried on each side of the best fit's slope, on its own ridge
MAX_ROUNDS = 100  # regime reassignments from one candidate's mask before its best state so far is taken
DESIGNS_KEPT = 64  # the latest masks' designs kept for reuse (each is segments x 8 floats: bounded memory)
NOT_SEPARABLE = "not separable in these runs (e.g. one prompt length, or no speculative step): prior kept"


@dataclass(frozen=True)
class StepSet:
    """Steps of one server (one run, one variant) with the window the server ran."""

    run: str
    variant: str
    draft_runs: int  # draft passes per step (0: no speculation)
    verified: int  # positions the target verifies per sequence (1: no speculation)
    steps: Sequence[Step]


@dataclass
class ParamResult:
    value: float
    se: float | None
    status: Literal["fitted", "prior", "bound", "zero"]
    note: str | None = None
    points: int = 0


@dataclass
class CostFit:
    params: dict[str, ParamResult]
    covariance: list[list[float]]  # over ``free`` in that order
    free: list[str]
    residual_scale_s: float  # of a segment's duration
    observations: int  # steps
    segments: int
    compute_bound_steps: int
    fitted: Any  # numpy arrays per step: fitted and observed duration
    observed: Any
    segment_fitted: Any  # per segment
    segment_observed: Any
    rows: list[tuple[str, str, str, int, int, int, int]] = field(
        default_factory=list
    )  # run, variant, level, b, C, k, P


def _arrays(sets: Sequence[StepSet]) -> dict[str, Any]:
    """Per step columns, plus ``seg``: the segment each step belongs to (see the module docstring)."""
    import numpy as np

    cols: dict[str, list[float]] = {k: [] for k in ("b", "C", "k", "t", "dec", "pre", "P", "y")}
    rows: list[tuple[str, str, str, int, int, int, int]] = []
    seg: list[int] = []
    n_seg = -1
    for s in sets:
        prev: Step | None = None
        length = 0
        for st in s.steps:
            joins = prev is not None and st.index == prev.index + 1 and length < SEGMENT_STEPS
            if joins:
                length += 1
            else:
                n_seg += 1
                length = 1
            seg.append(n_seg)
            prev = st
            cols["b"].append(st.decode)
            cols["C"].append(st.context)
            cols["k"].append(s.draft_runs)
            cols["t"].append(s.verified)
            cols["dec"].append(1.0 if st.decode else 0.0)
            cols["pre"].append(1.0 if st.prefills else 0.0)
            cols["P"].append(st.prefill_tokens)
            cols["y"].append(st.duration)
            rows.append((s.run, s.variant, st.level, st.decode, st.context, s.draft_runs, st.prefill_tokens))
    out: dict[str, Any] = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    out["seg"] = np.asarray(seg, dtype=np.int64)
    out["rows"] = rows
    return out


def _design(a: Mapping[str, Any], compute: Any) -> Any:
    """Per-step design rows for the given compute-bound mask."""
    import numpy as np

    mem = a["dec"] * (1.0 - compute)
    return np.column_stack(
        [
            mem,
            mem * a["b"],
            mem * a["C"],
            a["dec"] * compute * a["b"] * a["t"],
            a["dec"] * a["k"],
            a["dec"] * a["k"] * a["C"],
            a["pre"],
            a["pre"] * a["P"],
        ]
    )


def _sum_segments(v: Any, starts: Any) -> Any:
    import numpy as np

    return np.add.reduceat(v, starts, axis=0)


def _wls(x: Any, y: Any, w: Any) -> Any:
    import numpy as np

    sw = np.sqrt(w)
    theta, *_ = np.linalg.lstsq(x * sw[:, None], y * sw, rcond=None)
    return theta


def _robust(x: Any, y: Any, rounds: int = 8) -> tuple[Any, Any]:
    """Huber IRLS: (theta, weights)."""
    import numpy as np

    w = np.ones_like(y)
    theta = _wls(x, y, w)
    for _ in range(rounds):
        r = y - x @ theta
        scale = 1.4826 * float(np.median(np.abs(r - np.median(r)))) or float(np.std(r)) or 1.0
        u = np.abs(r) / (HUBER_K * scale)
        w = 1.0 / np.maximum(u, 1.0)  # Huber: 1 within the threshold, 1 / u beyond
        theta = _wls(x, y, w)
    return theta, w


def _separable(x: Any, j: int, others: list[int]) -> bool:
    """Column ``j`` is not (numerically) a combination of ``others``."""
    import numpy as np

    col = x[:, j]
    if not np.any(col):
        return False
    if not others:
        return True
    base = x[:, others]
    coef, *_ = np.linalg.lstsq(base, col, rcond=None)
    resid = col - base @ coef
    return float(np.linalg.norm(resid)) > 1e-6 * float(np.linalg.norm(col))


def fit_costs(sets: Sequence[StepSet], prior: Mapping[str, float]) -> CostFit:
    """The eight step-cost parameters from the steps of every server (see the module docstring)."""
    import numpy as np

    from spectrn.errors import AnalysisError

    a = _arrays(sets)
    y_step = a["y"]
    n = y_step.size
    if n < 20:
        raise AnalysisError(
            f"only {n} usable engine steps in the runs: too few to fit step costs",
            hint="bench more requests (or longer outputs), or at a larger --time-scale so the client keeps up",
        )
    starts = np.flatnonzero(np.diff(a["seg"], prepend=-1))
    y = _sum_segments(y_step, starts)
    theta = np.asarray([float(prior[p]) for p in PARAMS])
    c_index = PARAMS.index("compute_per_token_s")

    designs: dict[bytes, Any] = {}  # regime mask -> its segments' design, the latest DESIGNS_KEPT

    def design(compute: Any) -> Any:
        key = compute.tobytes()
        if key not in designs:
            if len(designs) >= DESIGNS_KEPT:
                designs.pop(next(iter(designs)))  # the oldest
            designs[key] = _sum_segments(_design(a, compute), starts)
        return designs[key]

    # Which parameters the data can separate (judged on the memory-bound design: compute is profiled apart).
    x0 = design(np.zeros(n))
    separable0 = [i for i in range(len(PARAMS)) if i != c_index]
    for name in DROP_ORDER:
        j = PARAMS.index(name)
        if j in separable0 and not _separable(x0, j, [i for i in separable0 if i != j]):
            separable0.remove(j)

    def fit(compute: Any, base: Any, unknown: list[int]) -> tuple[Any, Any, float]:
        x = design(compute)
        fixed = [i for i in range(len(PARAMS)) if i not in unknown]
        out = base.copy()
        est, w = _robust(x[:, unknown], y - x[:, fixed] @ base[fixed])
        out[unknown] = est
        r = y - x @ out
        return out, w, float(np.sum(w * r * r))

    def nonnegative(compute: Any, base: Any, unknown: list[int]) -> tuple[Any, Any, float, list[int]]:
        """``fit``, with every term the fit wants negative fixed at 0 (a term the data say is absent): theta,
        weights, residual and the terms left free."""
        while True:
            out, w, ssr = fit(compute, base, unknown)
            negative = [j for j in unknown if out[j] < 0]
            if not negative:
                return out, w, ssr, unknown
            unknown = [j for j in unknown if j not in negative]
            out[negative] = 0.0
            base = out

    def memory(th: Any) -> Any:
        return th[0] + th[1] * a["b"] + th[2] * a["C"]

    dec = a["dec"] > 0
    none = np.zeros(n)
    theta0, w0, _, free0 = nonnegative(none, theta, separable0)  # the compute column is 0 here

    def determined(compute: Any, unknown: list[int]) -> list[int]:
        """``unknown`` less the terms this regime mask leaves undetermined (e.g. every memory term when every
        decode step is compute bound): dropped in ``DROP_ORDER``, the compute slope last, by ``_separable`` on
        this mask's own design."""
        x = design(compute)
        kept = list(unknown)
        for j in [PARAMS.index(name) for name in DROP_ORDER] + [c_index]:
            if j in kept and not _separable(x, j, [i for i in kept if i != j]):
                kept.remove(j)
        return kept

    def regimes(th: Any, compute: Any) -> Any:
        """The regimes ``th`` gives; a step within rounding of the ridge keeps its regime in ``compute``."""
        comp, mem = th[c_index] * a["b"] * a["t"], memory(th)
        near = 1e-9 * (np.abs(comp) + np.abs(mem))
        return (dec & ((comp - mem > near) | ((comp - mem >= -near) & (compute > 0)))).astype(float)

    # The profile: from each candidate slope's mask, fit every term with that mask, reassign the regimes from
    # the fit and go on until the mask repeats (a fixed point, or a cycle: its best state is taken). A term the
    # mask leaves undetermined is held at 0 there (it does not enter the mask's steps).
    profile = list(range(len(PARAMS)))  # every term: compute-bound steps can separate one the memory-only cannot
    # mask -> weighted residual, theta, next mask, whether the mask determines the weights term
    states: dict[bytes, tuple[float, Any, Any, bool]] = {}

    def state(compute: Any) -> tuple[float, Any, Any, bool]:
        key = compute.tobytes()
        if key not in states:
            unknown = determined(compute, profile)
            base = theta0.copy()
            base[[j for j in profile if j not in unknown]] = 0.0
            th, _, ssr, _ = nonnegative(compute, base, unknown)  # never empty: every step decodes or prefills
            states[key] = (ssr, th, regimes(th, compute), 0 in unknown)
        return states[key]

    def settle(compute: Any) -> Any:
        """The mask the regime iteration from ``compute`` ends with."""
        seen: list[Any] = []
        keys: list[bytes] = []
        for _ in range(MAX_ROUNDS):
            key = compute.tobytes()
            if key in keys:  # a cycle: the best of its states
                return min(seen[keys.index(key) :], key=lambda m: (state(m)[0], m.sum()))
            seen.append(compute)
            keys.append(key)
            compute = state(compute)[2]
        return min(seen, key=lambda m: (state(m)[0], m.sum()))

    tie = 1e-20 * float(np.sum(y * y))  # residuals closer than this are equal (rounding)
    positive = 1e-9 * float(np.mean(y_step))  # a weights term above rounding

    def better(ssr: float, compute: Any, best: tuple[float, Any, Any]) -> bool:
        """A smaller residual; at an equal one (a step exactly at the ridge), fewer compute-bound steps, then the
        mask whose compute-bound steps come first: a choice between equal masks by what they are, not by when they
        were found."""
        if abs(ssr - best[0]) > tie:
            return ssr < best[0]
        mine, theirs = np.flatnonzero(compute), np.flatnonzero(best[1])
        return (mine.size, mine.tolist()) < (theirs.size, theirs.tolist())

    def accepted(ssr: float, compute: Any, th: Any, weights_known: bool) -> bool:
        """A compute regime must explain the steps better by a clear margin, with enough compute-bound steps, a
        positive slope (a mask's fit holds a slope it wants negative at 0: no compute regime) and a positive weights
        term where the mask determines it."""
        return (
            ssr < (1 - MIN_GAIN) * ssr_none
            and th[c_index] > 0
            and (th[0] > positive or not weights_known)
            and compute.sum() >= MIN_COMPUTE_STEPS
        )

    # The memory-only mask, scored as every mask is: the terms it cannot separate held at 0, not at their priors (a
    # prior can push a term it aliases below 0, which a compute regime with that term free would then beat).
    ssr_none, theta_none, *_ = state(none)
    best = (ssr_none, none, theta0)

    def consider(start: Any) -> None:
        nonlocal best
        compute = settle(start)
        ssr, th, _, weights_known = state(compute)
        if better(ssr, compute, best) and accepted(ssr, compute, th, weights_known):
            best = (ssr, compute, th)

    decoding = np.flatnonzero(dec)

    def ridge_of(th: Any) -> Any:
        """Each decode step's memory time per verified token under ``th``: the slope above which it is compute
        bound."""
        return memory(th)[decoding] / (a["b"][decoding] * a["t"][decoding])

    def below(ridge: Any, edge: float) -> Any:
        """The mask of the decode steps whose ``ridge`` is at or below ``edge``."""
        compute = np.zeros(n)
        compute[decoding[ridge <= edge]] = 1.0
        return compute

    # The candidates: every decode step compute bound, and each slope's mask (on the memory-only mask's ridge;
    # the memory-only mask itself is the best so far).
    consider(dec.astype(float))
    ridge_none = ridge_of(theta_none)
    for c in np.unique(np.quantile(ridge_none, np.linspace(0.0, 1.0, 121)) * 1.0001) if ridge_none.size else []:
        consider(below(ridge_none, c))
    # Refinement: on the best fit's own ridge (the memory-only fit's, bent by the compute-bound steps, can miss
    # masks), the REFINE thresholds either side of its slope, each between two distinct values (steps alike share
    # their regime), until the best stays.
    for _ in range(MAX_ROUNDS):
        ssr_b, mask_b, th_b = best
        if not mask_b.any():
            break
        ridge_b = ridge_of(th_b)
        edges = np.unique(ridge_b)
        at = int(np.searchsorted(edges, th_b[c_index]))
        for edge in edges[max(0, at - REFINE) : at + REFINE]:
            consider(below(ridge_b, edge))
        if best[0] == ssr_b:
            break
    # The last fit, with the regime taken: the terms it determines are fitted (those the fit wants negative are
    # fixed at 0), the others keep their priors.
    _, compute, theta_c = best
    n_compute = int(compute.sum())
    why = "no compute-bound step observed"
    if n_compute:
        separated = determined(compute, profile)
        theta_c = theta_c.copy()
        theta_c[[j for j in profile if j not in separated]] = [
            float(prior[PARAMS[j]]) for j in profile if j not in separated
        ]
        theta, w, _, free = nonnegative(compute, theta_c, separated)
        if c_index not in free:  # the compute slope came out negative: no compute regime after all
            n_compute = 0
            why = "a compute regime fitted a negative slope: discarded"
    notes: dict[str, str] = {}
    if not n_compute:
        compute, theta, w, separated, free = none, theta0.copy(), w0, separable0, free0
        ridge = ridge_of(theta0)  # the memory-only fit's
        bound = max(0.0, float(np.min(ridge))) if ridge.size else float("inf")
        c_prior = float(prior["compute_per_token_s"])
        theta[c_index] = min(c_prior, bound)
        notes["compute_per_token_s"] = f"{why}: the steps bound it at <= {bound:.3g} s; " + (
            "the prior is used (within the bound)" if c_prior <= bound else "the bound is used (the prior exceeds it)"
        )

    x_step = _design(a, compute)
    x = _sum_segments(x_step, starts)
    fitted = x @ theta
    r = y - fitted
    dof = max(1, y.size - len(free))
    sigma2 = float(np.sum(w * r * r)) / dof
    xf = x[:, free] * np.sqrt(w)[:, None]
    cov = sigma2 * np.linalg.pinv(xf.T @ xf)

    params: dict[str, ParamResult] = {}
    for j, name in enumerate(PARAMS):
        points = int(np.count_nonzero(x_step[:, j]))
        if j in free:
            k = free.index(j)
            params[name] = ParamResult(float(theta[j]), float(np.sqrt(max(cov[k, k], 0.0))), "fitted", None, points)
        elif name == "compute_per_token_s":  # not fitted: every step is taken as memory bound
            status: Literal["prior", "bound"] = "prior" if theta[j] == float(prior[name]) else "bound"
            params[name] = ParamResult(float(theta[j]), None, status, notes[name])
        elif j in separated:
            params[name] = ParamResult(0.0, None, "zero", "the fit wanted a negative value: fixed at 0", points)
        else:
            params[name] = ParamResult(float(theta[j]), None, "prior", NOT_SEPARABLE, points)
    return CostFit(
        params=params,
        covariance=[[float(v) for v in row] for row in cov],
        free=[PARAMS[j] for j in free],
        residual_scale_s=float(np.sqrt(sigma2)),
        observations=n,
        segments=int(y.size),
        compute_bound_steps=n_compute,
        fitted=x_step @ theta,
        observed=y_step,
        segment_fitted=fitted,
        segment_observed=y,
        rows=a["rows"],
    )
