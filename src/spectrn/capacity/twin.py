"""The calibrated twin's capacity at the same SLOs, per window, for comparison with the measured search.

The twin's engine (``spectrn.twin.engine.run_level``: the simulator's scheduling offline, real seconds) runs
each probed concurrency with the same requests-per-probe rule as a measured probe, and the percentile SLOs are
judged on its per-request TTFT, TPOT and e2e exactly as on a run (linear-interpolated percentiles; a class-scoped
SLO over that class's requests). The same bracketing search (start, maximum, precision) finds the capacity of
the baseline and of each window. ITL SLOs are not judged (the engine keeps no per-token gaps): they are named in
the note and the twin's capacity ignores them.
"""

from __future__ import annotations

from typing import Any

from spectrn.capacity.search import Bracket, requests_per_probe
from spectrn.configuration.config import SpectrnConfig
from spectrn.labels import window_label
from spectrn.run.capacity import Capacity, TwinCapacity, TwinPoint


def _percentile(values: list[float], p: float) -> float | None:
    import numpy as np

    finite = [v for v in values if v == v]
    return float(np.percentile(finite, p)) if finite else None


def twin_capacity(twin: Any, cfg: SpectrnConfig, measured: Capacity, windows: list[int], name: str) -> TwinCapacity:
    """Capacity per window ('baseline' and 'k<window>') by the twin, at ``measured``'s SLOs and search bounds."""
    from spectrn.analyze.slo import parse_slos
    from spectrn.twin.engine import ClassLoad, run_level
    from spectrn.twin.predict import _class_text, _resolve

    slos = [s for s in parse_slos(measured.slos) if s.percentile is not None]
    judged = [s for s in slos if s.metric != "itl"]
    cal = twin.calibration
    preset = twin.preset
    weights = {c: w for c, w in cal.workload.mix.items() if w > 0}
    total = sum(weights.values()) or 1.0
    names = list(weights)
    texts = {c: _class_text(preset, c) for c in names}
    max_tokens = cfg.bench.max_tokens or cal.workload.max_tokens
    limit = cfg.max_num_seqs or preset.max_num_seqs

    def probe(window: int | None, c: int) -> TwinPoint:
        model = _resolve(preset, twin, window)
        loads = [ClassLoad(x, weights[x] / total, max(1, round(cal.workload.prompt_tokens.get(x, 64.0))),
                           model.position_probs(texts[x])) for x in names]  # fmt: skip
        n = requests_per_probe([s.percentile for s in slos if s.percentile is not None],
                               minimum=None, kind="concurrency", load=c)  # fmt: skip
        res = run_level(model, loads, concurrency=c, requests=n, max_tokens=max_tokens, batch_limit=limit,
                        seed=cfg.bench.seed)  # fmt: skip
        ok = True
        for s in judged:
            values: list[float] = list(getattr(res, s.metric))
            if s.prompt_class is not None:
                k = res.classes.index(s.prompt_class) if s.prompt_class in res.classes else -1
                values = [v for v, cl in zip(values, res.cls, strict=True) if cl == k]
            assert s.percentile is not None
            observed = _percentile(values, s.percentile)
            ok = ok and observed is not None and observed <= s.threshold_s
        return TwinPoint(concurrency=c, tpot_p50_s=res.p50("tpot") or float("nan"),
                         ttft_p50_s=res.p50("ttft") or float("nan"), e2e_p50_s=res.p50("e2e") or float("nan"),
                         passed=ok)  # fmt: skip

    caps: dict[str, int | None] = {}
    points: dict[str, list[TwinPoint]] = {}
    for window in [None, *windows]:
        key = "baseline" if window is None else window_label(window)
        b = Bracket("concurrency", measured.start, measured.maximum, measured.precision)
        points[key] = []
        while (load := b.next_load()) is not None:
            pt = probe(window, int(load))
            points[key].append(pt)
            b.record(load, pt.passed)
        caps[key] = int(b.capacity) if b.capacity is not None else None
    note = "the twin's engine judged on the same percentile SLOs and requests per probe"
    skipped = [s.text for s in slos if s.metric == "itl"]
    if skipped:
        note += f"; not judged by the twin (no per-token gaps): {', '.join(skipped)}"
    return TwinCapacity(twin=name, windows=caps, points=points, note=note)
