"""The twin's capacity per window on a stand-in engine whose TPOT is a known law of the concurrency: the same
search as a measurement, percentile SLOs judged on the twin's per-request values (a class-scoped SLO on its
class only, a value equal to the target meeting it), ITL SLOs named and not judged."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from spectrn.capacity.twin import twin_capacity
from spectrn.configuration.sources import build_config
from spectrn.run.capacity import TwinPoint
from spectrn.twin.engine import LevelResult

SLO_S = 0.040


def law(window: int | None, c: int) -> dict[str, float]:
    """TPOT per class: structured 10 ms per concurrent request (exactly 40 ms at 4), open half that;
    speculation halves both. TTFT: a flat 0.5 s."""
    speed = 1.0 if window is None else 0.5
    return {"structured": SLO_S * c / 4 * speed, "open": SLO_S * c / 8 * speed}


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def run_level(model: Any, loads: Any, **kw: Any) -> LevelResult:
        calls.append({"window": model.window, "classes": [(x.name, x.weight, x.prompt_tokens) for x in loads], **kw})
        tpot = law(model.window, kw["concurrency"])
        return LevelResult(classes=["structured", "open"], cls=[0, 1, 0, 1], ttft=[0.5] * 4,
                           tpot=[tpot["structured"], tpot["open"]] * 2, e2e=[1.0] * 4)  # fmt: skip

    monkeypatch.setattr("spectrn.twin.engine.run_level", run_level)
    resolved = lambda preset, twin, window: SimpleNamespace(window=window, position_probs=lambda t: [0.5])  # noqa: E731
    monkeypatch.setattr("spectrn.twin.predict._resolve", resolved)
    monkeypatch.setattr("spectrn.twin.predict._class_text", lambda preset, name: name)
    return calls


def twin() -> Any:
    workload = SimpleNamespace(mix={"structured": 3.0, "open": 1.0, "unused": 0.0}, max_tokens=64,
                               prompt_tokens={"structured": 99.6})  # fmt: skip
    return SimpleNamespace(calibration=SimpleNamespace(workload=workload), preset=SimpleNamespace(max_num_seqs=8))


def measured(*slos: str) -> Any:
    return SimpleNamespace(slos=list(slos), start=1, maximum=64, precision=1)


def test_the_twins_capacity_per_window_judges_a_class_slo_on_its_class(engine: list[dict[str, Any]]) -> None:
    cfg = build_config({}, {"bench.max_tokens": 32, "bench.seed": 7, "max_num_seqs": 6}, {})
    got = twin_capacity(twin(), cfg, measured("structured/p50:tpot<=40ms", "p50:ttft<=1s", "p90:itl<=10ms"), [3],
                        "twin.yaml")  # fmt: skip
    # structured TPOT 10 ms x c: exactly 40 ms at 4 (met: <=), 50 ms at 5; with speculation 5 ms x c: 8 passes
    # (pooled over both classes the median would be 7.5 ms x c: 5 would pass)
    assert got.windows == {"baseline": 4, "k3": 8}
    assert [(p.concurrency, p.passed) for p in got.points["baseline"]] == [
        (1, True), (2, True), (4, True), (8, False), (6, False), (5, False)
    ]  # fmt: skip
    # each point's medians are the pooled requests' (structured and open alike): TPOT (10 + 5) / 2 ms x c
    point = got.points["baseline"][0]
    assert point.tpot_p50_s == pytest.approx(0.0075)
    assert point == TwinPoint(concurrency=1, tpot_p50_s=point.tpot_p50_s, ttft_p50_s=0.5, e2e_p50_s=1.0, passed=True)
    assert got.note == ("the twin's engine judged on the same percentile SLOs and requests per probe; not judged "
                        "by the twin (no per-token gaps): p90:itl<=10ms")  # fmt: skip
    first = engine[0]
    # p90 (the ITL SLO counts for the request rule) needs 100 requests; the mix 3 : 1 of the classes measured;
    # the structured prompt 99.6 tokens rounds to 100, a class without a measured length has 64
    assert (first["window"], first["concurrency"], first["requests"], first["max_tokens"]) == (None, 1, 100, 32)
    assert (first["batch_limit"], first["seed"]) == (6, 7)  # the config's max_num_seqs, its seed
    assert first["classes"] == [("structured", 0.75, 100), ("open", 0.25, 64)]
    assert [c["window"] for c in engine].count(3) == len(got.points["k3"])


def test_a_twin_that_fails_at_the_start_has_no_capacity(engine: list[dict[str, Any]]) -> None:
    got = twin_capacity(twin(), build_config({}, None, {}), measured("p50:ttft<=250ms"), [], "t")
    assert got.windows == {"baseline": None}
    assert [(p.concurrency, p.passed) for p in got.points["baseline"]] == [(1, False)]
    assert got.note == "the twin's engine judged on the same percentile SLOs and requests per probe"
