"""The SLO language: every valid form, every invalid form with its message, and evaluation against values worked
out by hand from the definitions (docs/slo.md), not from the code under test."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from spectrn.analyze.slo import RequestValues, Slo, SloSyntaxError, evaluate, parse_slo, parse_slos, slos_of
from spectrn.configuration.sources import build_config, load_config
from spectrn.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("p90:tpot<=50ms", Slo("tpot", 90.0, 0.05, None)),
        ("p99:ttft<=2s", Slo("ttft", 99.0, 2.0, None)),
        ("tpot<=50ms", Slo("tpot", None, 0.05, None)),
        ("e2e<=1.5s", Slo("e2e", None, 1.5, None)),
        ("p50:itl<=20ms", Slo("itl", 50.0, 0.02, None)),
        ("p99.9:e2e <= 3 s", Slo("e2e", 99.9, 3.0, None)),
        ("p100:ttft<=.5s", Slo("ttft", 100.0, 0.5, None)),
        ("structured/p90:tpot<=40ms", Slo("tpot", 90.0, 0.04, "structured")),
        ("open/itl<=80ms", Slo("itl", None, 0.08, "open")),
        ("  TTFT<=250MS  ", Slo("ttft", None, 0.25, None)),
    ],
)
def test_valid_forms(text: str, expected: Slo) -> None:
    got = parse_slo(text)
    assert (got.metric, got.percentile, got.prompt_class) == (
        expected.metric,
        expected.percentile,
        expected.prompt_class,
    )
    assert got.threshold_s == pytest.approx(expected.threshold_s, rel=1e-12)
    assert got.per_request == (expected.percentile is None)
    assert parse_slo(got.text) == got  # the canonical spelling reads back as the same SLO


def test_canonical_text() -> None:
    assert parse_slo("p90:tpot<=0.05s").text == "p90:tpot<=50ms"
    assert parse_slo("p99:ttft<=2000ms").text == "p99:ttft<=2s"
    assert parse_slo("structured/tpot<=40ms").text == "structured/tpot<=40ms"


@pytest.mark.parametrize(
    ("text", "message", "fix"),
    [
        ("", "the SLO is empty", "p90:tpot<=50ms"),
        ("tpot", "has no '<=' comparison", "<metric><=<number><unit>"),
        ("tpot<50ms", "compares with '<'", "tpot<=50ms"),
        ("tpot>=50ms", "compares with '>='", "tpot<=50ms"),
        ("tpot=50ms", "compares with '='", "tpot<=50ms"),
        ("p90:tpot<=50", "the limit 50 has no unit", "tpot<=50ms"),
        ("p90:tpot<=50us", "unknown unit 'us'", "use ms or s"),
        ("p90:tpot<=fast", "'fast' is not a positive number with a unit", "tpot<=50ms"),
        ("tpot<=-5ms", "'-5ms' is not a positive number with a unit", "tpot<=50ms"),
        ("tpot<=0ms", "must be above 0", "tpot<=50ms"),
        ("p0:tpot<=50ms", "percentile p0 is outside (0, 100]", "p99"),
        ("p101:tpot<=50ms", "percentile p101 is outside (0, 100]", "p99"),
        ("x90:tpot<=50ms", "'x90' is not a percentile", "p<N>"),
        ("90:tpot<=50ms", "'90' is not a percentile", "p<N>"),
        ("p90:latency<=50ms", "unknown metric 'latency'", "ttft, tpot, itl, e2e"),
        ("p90 tpot<=50ms", "unknown metric 'p90 tpot'", "ttft, tpot, itl, e2e"),
        ("bad class/tpot<=50ms", "prompt class 'bad class' is not a prompt class name", "structured/p90"),
        ("/tpot<=50ms", "prompt class '' is not a prompt class name", "<class>/<slo>"),
    ],
)
def test_invalid_forms(text: str, message: str, fix: str) -> None:
    with pytest.raises(SloSyntaxError) as e:
        parse_slo(text)
    assert message in e.value.message
    if text.strip():
        assert repr(text) in e.value.message or repr(text.strip()) in e.value.message  # names the SLO text
    assert fix in e.value.fix


def test_parse_slos_names_the_item() -> None:
    with pytest.raises(SloSyntaxError, match=r"item 2: SLO 'ttft<2s'"):
        parse_slos(["p90:tpot<=50ms", "ttft<2s"])


def test_legacy_keys_are_per_request_slos() -> None:
    slos = slos_of(["p90:tpot<=50ms"], slo_ttft_s=2.0, slo_tpot_s=0.05)
    assert slos == (Slo("tpot", 90.0, 0.05), Slo("ttft", None, 2.0), Slo("tpot", None, 0.05))
    assert slos_of(["tpot<=50ms"], slo_tpot_s=0.05) == (Slo("tpot", None, 0.05),)  # the same target counts once


# ---- config ---------------------------------------------------------------------------------------------------


def test_config_error_names_flag_text_and_fix() -> None:
    with pytest.raises(ConfigError) as e:
        build_config({}, {"bench.slo": ["p90:tpot<=50"]}, {}, sources={"bench.slo": "flag --slo"})
    assert "--slo: SLO 'p90:tpot<=50': the limit 50 has no unit (config key bench.slo)" in str(e.value)
    assert e.value.hint == "write ms or s after it, e.g. tpot<=50ms"


def test_config_error_names_file_and_environment(tmp_path: Path) -> None:
    f = tmp_path / "spectrn.yaml"
    f.write_text("bench:\n  slo:\n    - p90:tpot<=50ms\n    - tpot<=fast\n")
    with pytest.raises(ConfigError, match=r"bench.slo: item 2: SLO 'tpot<=fast'.*from .*spectrn.yaml line 2"):
        load_config(f, environ={})
    with pytest.raises(ConfigError, match=r"unknown unit 'q'.*environment variable SPECTRN_BENCH__SLO"):
        build_config({}, None, {"SPECTRN_BENCH__SLO": "p90:tpot<=50ms,ttft<=2q"})
    cfg = build_config({}, None, {"SPECTRN_BENCH__SLO": "p90:tpot<=50ms,ttft<=2s"})
    assert cfg.bench.slo == ["p90:tpot<=50ms", "ttft<=2s"]


# ---- evaluation -----------------------------------------------------------------------------------------------

# five requests, worked by hand below
TTFT = [0.10, 0.20, 0.30, 0.40, 0.50]
TPOT = [0.010, 0.020, math.nan, 0.040, 0.050]  # request 2 had one token: no TPOT
E2E = [1.0, 2.0, 0.3, 4.0, 5.0]
ITL_MAX = [0.015, 0.030, math.nan, 0.060, 0.090]
TOKENS = [10.0, 20.0, 1.0, 40.0, 50.0]
CLASSES = ["a", "a", "b", "b", "b"]


def values(classes: list[str] | None = CLASSES) -> RequestValues:
    return RequestValues(TTFT, TPOT, E2E, ITL_MAX, TOKENS, prompt_class=classes)


def test_percentile_slos_by_hand() -> None:
    slos = parse_slos(["p90:ttft<=450ms", "p90:tpot<=45ms", "p50:e2e<=2s", "a/p50:ttft<=100ms"])
    res = evaluate(slos, values(), wall_s=10.0)
    by = {o.slo.text: o for o in res.percentiles}
    # p90 of 5 values, linear: rank 0.9 * 4 = 3.6 -> 0.40 + 0.6 * (0.50 - 0.40) = 0.46 > 0.45
    assert by["p90:ttft<=450ms"].observed_s == pytest.approx(0.46) and by["p90:ttft<=450ms"].met is False
    # TPOT without request 2: [0.01, 0.02, 0.04, 0.05], rank 0.9 * 3 = 2.7 -> 0.04 + 0.7 * 0.01 = 0.047 > 0.045
    assert by["p90:tpot<=45ms"].observed_s == pytest.approx(0.047) and by["p90:tpot<=45ms"].n == 4
    assert by["p90:tpot<=45ms"].met is False
    assert by["p50:e2e<=2s"].observed_s == pytest.approx(2.0) and by["p50:e2e<=2s"].met is True  # median of 5
    # class a only: [0.10, 0.20], median 0.15 > 0.10
    assert by["a/p50:ttft<=100ms"].observed_s == pytest.approx(0.15) and by["a/p50:ttft<=100ms"].n == 2
    assert by["a/p50:ttft<=100ms"].met is False
    assert res.met is False
    assert res.requests_within is None and res.goodput_requests_per_s is None  # no per-request SLO: no goodput


def test_goodput_by_hand() -> None:
    res = evaluate(parse_slos(["ttft<=350ms", "tpot<=45ms"]), values(), wall_s=10.0, attempted=8)
    # request 0 (0.10, 0.010) and 1 (0.20, 0.020) meet both; 2 has no TPOT; 3 and 4 miss TTFT
    assert res.requests_within == 2
    assert res.goodput_requests_per_s == pytest.approx(2 / 10.0)
    assert res.goodput_tokens_per_s == pytest.approx((10 + 20) / 10.0)
    assert res.share_within == pytest.approx(2 / 8)  # 3 failed requests count as missing the target
    assert res.met is None  # no percentile SLO


def test_per_request_itl_and_e2e() -> None:
    res = evaluate(parse_slos(["itl<=50ms", "e2e<=4.5s"]), values(), wall_s=4.0)
    # ITL max <= 0.05: requests 0, 1 (2 has no gap); e2e <= 4.5: 0, 1, 2, 3 -> requests 0 and 1
    assert res.requests_within == 2 and res.goodput_tokens_per_s == pytest.approx(30 / 4.0)


def test_class_scoped_per_request_slo_binds_only_its_class() -> None:
    res = evaluate(parse_slos(["b/ttft<=450ms"]), values(), wall_s=5.0)
    # class a (0, 1) is not bound; class b: 0.30 and 0.40 meet, 0.50 misses
    assert res.requests_within == 4
    assert res.goodput_tokens_per_s == pytest.approx((10 + 20 + 1 + 40) / 5.0)
    # without classes, a class-scoped SLO binds nobody
    assert evaluate(parse_slos(["b/ttft<=450ms"]), values(None), wall_s=5.0).requests_within == 5


def test_itl_percentile_uses_the_token_quantiles() -> None:
    asked: list[tuple[float, str | None]] = []

    def quantile(q: float, cls: str | None) -> float | None:
        asked.append((q, cls))
        return 0.012

    res = evaluate(parse_slos(["p99:itl<=10ms", "b/p50:itl<=20ms"]), values(), wall_s=1.0, itl_quantile=quantile)
    assert asked == [(0.99, None), (0.5, "b")]
    assert [(o.met, o.n) for o in res.percentiles] == [(False, 5), (True, 3)]
    with pytest.raises(ValueError, match="itl_quantile"):
        evaluate(parse_slos(["p99:itl<=10ms"]), values(), wall_s=1.0)


def test_nothing_to_judge() -> None:
    res = evaluate(parse_slos(["c/p90:ttft<=1s", "tpot<=1s"]), values(), wall_s=0.0)
    assert res.percentiles[0].met is None and res.percentiles[0].observed_s is None and res.met is None
    assert res.goodput_requests_per_s is None and res.requests_within == 4  # request 2 has no TPOT
