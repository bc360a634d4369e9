"""The dashboard validator rule by rule, and the dashboard body written out whole.

Each refusal case is a hand-made body that breaks exactly one rule of CloudWatch's dashboard body structure
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html)
and the whole message it must raise; the acceptance cases sit on each boundary from the allowed side. Then the
body ``build_dashboard`` makes for a small hand-made run, every widget, metric array and property written out,
and the layout and colours of a sweep whose configs cover different loads and prompt classes."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from doubles.runfactory import make_run
from spectrn.analyze.run import ensure_summary
from spectrn.errors import PublishError
from spectrn.publish import dashboard
from spectrn.publish.dashboard import DashboardRun
from spectrn.run.folder import RunFolder
from spectrn.run.summary import Speedup, Speedups, Summary, Verdict

W = "widget 0"


def _text(y: int = 0, **kw: Any) -> dict[str, Any]:
    return {"type": "text", "x": 0, "y": y, "width": 24, "height": 1, "properties": {"markdown": "# r"}} | kw


def _metric(*metrics: Any, **props: Any) -> dict[str, Any]:
    entries = list(metrics) if metrics else [["NS", "M"]]
    return {
        "type": "metric", "x": 0, "y": 0, "width": 6, "height": 6,
        "properties": {"region": "eu-west-1", "metrics": entries} | props,
    }  # fmt: skip


def _body(*widgets: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"widgets": list(widgets)} | top


def _refusal(body: Any) -> str:
    with pytest.raises(PublishError) as e:
        dashboard.validate_dashboard(body)
    assert type(e.value) is PublishError
    return str(e.value)


def _invalid(*problems: str) -> str:
    return "invalid dashboard body: " + "; ".join(problems)


# ---- the body as a whole -------------------------------------------------------------------------------------


def test_a_body_that_is_not_an_object_is_refused_with_the_shape_it_needs() -> None:
    need = "dashboard body must be a JSON object with a 'widgets' list"
    assert _refusal([_text()]) == need
    assert _refusal('[{"type": "text"}]') == need
    assert _refusal("{not json") == (
        "dashboard body is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )


@pytest.mark.parametrize("widgets", [None, [], {"0": {}}], ids=["absent", "empty", "object"])
def test_a_body_without_a_non_empty_widgets_list_is_refused(widgets: Any) -> None:
    body = {} if widgets is None else {"widgets": widgets}
    assert _refusal(body) == "dashboard body needs a non-empty 'widgets' list"


def test_the_documented_top_level_keys_are_accepted_and_others_named() -> None:
    ok = _body(_text(), start="-PT3H", end="P0D", periodOverride="inherit", variables=[])
    assert dashboard.validate_dashboard(ok) is ok
    assert _refusal(_body(_text(), title="x", Variables=[])) == _invalid(
        "unknown top-level keys ['Variables', 'title']"
    )


def test_end_needs_start_but_start_alone_is_fine() -> None:
    assert _refusal(_body(_text(), end="P0D")) == _invalid("'end' needs 'start'")
    body = _body(_text(), start="-PT3H")
    assert dashboard.validate_dashboard(body) is body


def test_period_override_is_auto_or_inherit_and_may_be_left_out() -> None:
    for ok in (_body(_text()), _body(_text(), periodOverride="auto"), _body(_text(), periodOverride="inherit")):
        assert dashboard.validate_dashboard(ok) is ok
    for bad in ("AUTO", "Inherit", None):
        assert _refusal(_body(_text(), periodOverride=bad)) == _invalid("periodOverride must be 'auto' or 'inherit'")


def test_a_body_given_as_json_text_is_parsed_and_returned_as_an_object() -> None:
    text = '{"widgets": [{"type": "text", "x": 0, "y": 0, "width": 24, "height": 1, "properties": {"markdown": "a"}}]}'
    assert dashboard.validate_dashboard(text) == {
        "widgets": [{"type": "text", "x": 0, "y": 0, "width": 24, "height": 1, "properties": {"markdown": "a"}}]
    }


def test_five_hundred_widgets_are_allowed_and_five_hundred_and_one_are_not() -> None:
    body = _body(*[_text(y=n) for n in range(500)])
    assert dashboard.validate_dashboard(body) is body
    assert _refusal(_body(*[_text(y=n) for n in range(501)])) == _invalid("501 widgets (max 500)")


# ---- one widget ----------------------------------------------------------------------------------------------


def test_widgets_that_are_not_objects_are_each_named_and_the_rest_still_checked() -> None:
    body = _body(_text(), "text", 3, _text(y=1, type="chart"))
    assert _refusal(body) == _invalid(
        "widget 1 is not an object", "widget 2 is not an object", "widget 3: type 'chart'"
    )  # fmt: skip


def test_a_widget_needs_integer_geometry() -> None:
    for k, v in (("x", 1.0), ("y", None), ("width", True), ("height", "6")):
        w = _text() | {k: v}
        assert _refusal(_body(w)) == _invalid(f"{W}: x, y, width, height must be integers")


@pytest.mark.parametrize(
    ("x", "y", "width", "height"),
    [(0, 0, 1, 1), (23, 0, 1, 1), (0, 0, 24, 1), (0, 5, 24, 1000), (12, 0, 12, 2)],
)
def test_the_grid_edges_are_inside(x: int, y: int, width: int, height: int) -> None:
    body = _body(_text(x=x, y=y, width=width, height=height))
    assert dashboard.validate_dashboard(body) is body


@pytest.mark.parametrize(
    ("x", "y", "width", "height"),
    [(-1, 0, 6, 6), (0, 0, 0, 6), (0, 0, 25, 6), (1, 0, 24, 6), (19, 0, 6, 6), (0, -1, 6, 6), (0, 0, 6, 0),
     (0, 0, 6, 1001)],
)  # fmt: skip
def test_a_widget_outside_the_24_column_grid_is_refused(x: int, y: int, width: int, height: int) -> None:
    assert _refusal(_body(_text(x=x, y=y, width=width, height=height))) == _invalid(
        f"{W}: outside the 24-column grid (x={x}, width={width}, height={height})"
    )


def test_a_widget_needs_an_object_of_properties_and_the_widgets_after_it_are_still_checked() -> None:
    w = _text()
    w["properties"] = ["markdown"]
    assert _refusal(_body(w)) == _invalid(f"{W}: 'properties' must be an object")
    assert _refusal(_body(w, _text(y=1, type="chart"))) == _invalid(
        f"{W}: 'properties' must be an object", "widget 1: type 'chart'"
    )


@pytest.mark.parametrize("markdown", [None, "", "  \n"])
def test_a_text_widget_needs_non_empty_markdown(markdown: Any) -> None:
    w = _text()
    w["properties"] = {"markdown": markdown}
    assert _refusal(_body(w)) == _invalid(f"{W}: text widget needs non-empty markdown")


def test_other_widget_types_are_accepted_without_a_look_at_their_properties() -> None:
    ws = [_text(y=n, type=t) | {"properties": {}} for n, t in enumerate(("log", "alarm", "explorer"))]
    body = _body(*ws)
    assert dashboard.validate_dashboard(body) is body


# ---- overlaps ------------------------------------------------------------------------------------------------


def test_overlapping_widgets_are_named_leftmost_first_within_a_row() -> None:
    # widget 0 at x=6, widget 1 at x=0 on the same row: sorted by (y, x), widget 1 comes first
    body = _body(_text(x=6, width=6, height=2), _text(x=0, width=7, height=2))
    assert _refusal(body) == _invalid("widgets 1 and 0 overlap")


def test_an_overlap_further_down_is_found_after_a_wide_widget_above() -> None:
    # widget 0: x 0..11, row 5; widget 1: x 12..17, rows 5..6; widget 2: x 11..17, row 6, wider (7) than
    # widget 1's bottom edge is low (7): the search must stop on top edges, not on widths
    body = _body(_text(x=0, y=5, width=12, height=1), _text(x=12, y=5, width=6, height=2), _text(x=11, y=6, width=7))
    assert _refusal(body) == _invalid("widgets 1 and 2 overlap")


def test_widgets_that_touch_edge_to_edge_do_not_overlap() -> None:
    body = _body(
        _text(x=6, y=0, width=6, height=3), _text(x=0, y=1, width=6, height=1), _text(x=0, y=3, width=6, height=3),
        _text(x=12, y=0, width=1, height=9), _text(x=13, y=8, width=11, height=1),
    )  # fmt: skip
    assert dashboard.validate_dashboard(body) is body


def test_a_narrow_tall_widget_overlaps_what_lies_beside_it_lower_down() -> None:
    # widget 0: x 0, rows 10..19; widget 1: x 1, row 12 (beside it); widget 2: x 0, row 15 (inside it)
    body = _body(_text(x=0, y=10, width=1, height=10), _text(x=1, y=12, width=1), _text(x=0, y=15, width=1))
    assert _refusal(body) == _invalid("widgets 0 and 2 overlap")


def test_a_high_widget_overlaps_a_wide_one_that_starts_lower_and_further_left() -> None:
    # widget 0: x 20..21, rows 0..4; widget 1: x 16..21, row 1
    body = _body(_text(x=20, y=0, width=2, height=5), _text(x=16, y=1, width=6, height=1))
    assert _refusal(body) == _invalid("widgets 0 and 1 overlap")


def test_a_widget_without_height_overlaps_nothing_but_is_refused() -> None:
    body = _body(_text(x=0, y=0, width=6, height=2), _text(x=0, y=0, width=6, height=0))
    assert _refusal(body) == _invalid("widget 1: outside the 24-column grid (x=0, width=6, height=0)")


def test_a_widget_starting_where_another_ends_does_not_overlap_it() -> None:
    body = _body(_text(x=0, y=0, width=6, height=2), _text(x=0, y=2, width=6, height=2))
    assert dashboard.validate_dashboard(body) is body


# ---- how many problems are shown -----------------------------------------------------------------------------


def _bad_types(n: int) -> dict[str, Any]:
    return _body(*[_text(y=i, type="chart") for i in range(n)])


def test_up_to_ten_problems_are_listed_whole() -> None:
    assert _refusal(_bad_types(1)) == _invalid("widget 0: type 'chart'")
    assert _refusal(_bad_types(10)) == _invalid(*[f"widget {i}: type 'chart'" for i in range(10)])


def test_beyond_ten_problems_the_rest_are_counted() -> None:
    ten = [f"widget {i}: type 'chart'" for i in range(10)]
    assert _refusal(_bad_types(11)) == _invalid(*ten, "and 1 more")
    assert _refusal(_bad_types(13)) == _invalid(*ten, "and 3 more")


# ---- metric widgets ------------------------------------------------------------------------------------------


def test_a_plain_metric_widget_with_its_documented_options_is_accepted() -> None:
    w = _metric(
        ["NS", "M"],
        ["NS", "M", "D", "v", {"stat": "p99.9", "label": "l", "color": "#000000", "period": 300, "yAxis": "left",
                               "id": "m1", "visible": False, "region": "us-east-1", "accountId": "1", "unit": "s"}],
        [{"expression": "m1*2", "id": "e1", "label": "twice"}],
        ["NS", "M", {"stat": "tm99"}],
        view="bar", stat="IQM", period=60,
    )  # fmt: skip
    body = _body(w)
    assert dashboard.validate_dashboard(body) is body


@pytest.mark.parametrize("metrics", [None, [], "NS"])
def test_a_metric_widget_needs_a_non_empty_metrics_list(metrics: Any) -> None:
    w = _metric()
    w["properties"]["metrics"] = metrics
    if metrics is None:
        del w["properties"]["metrics"]
    assert _refusal(_body(w)) == _invalid(f"{W}: metric widget needs a non-empty 'metrics' list")


def test_five_hundred_metrics_are_allowed_and_five_hundred_and_one_are_not() -> None:
    body = _body(_metric(*[["NS", "M"]] * 500))
    assert dashboard.validate_dashboard(body) is body
    assert _refusal(_body(_metric(*[["NS", "M"]] * 501))) == _invalid(f"{W}: 501 metrics (max 500)")


@pytest.mark.parametrize("region", [None, "", 5])
def test_a_metric_widget_needs_a_region(region: Any) -> None:
    w = _metric()
    w["properties"]["region"] = region
    if region is None:
        del w["properties"]["region"]
    assert _refusal(_body(w)) == _invalid(f"{W}: 'region' is required")


def test_the_view_may_be_left_out_or_be_a_documented_one() -> None:
    for view in ("timeSeries", "singleValue", "bar", "pie", "table", "gauge"):
        body = _body(_metric(view=view))
        assert dashboard.validate_dashboard(body) is body
    body = _body(_metric())
    assert dashboard.validate_dashboard(body) is body
    assert _refusal(_body(_metric(view="line"))) == _invalid(f"{W}: view 'line'")
    assert _refusal(_body(_metric(view="timeseries"))) == _invalid(f"{W}: view 'timeseries'")


def test_a_widgets_stat_and_period_are_checked() -> None:
    assert _refusal(_body(_metric(stat="p999"))) == _invalid(f"{W}: stat 'p999'")
    assert _refusal(_body(_metric(period=90))) == _invalid(f"{W}: period 90 (1, 5, 10, 30 or a multiple of 60)")


@pytest.mark.parametrize("period", [1, 5, 10, 30, 60, 120, 3600])
def test_the_allowed_periods(period: int) -> None:
    body = _body(_metric(["NS", "M", {"period": period}], period=period))
    assert dashboard.validate_dashboard(body) is body


@pytest.mark.parametrize("period", [0, 2, 6, 11, 31, 59, 61, -60, 60.0, True, "60"])
def test_periods_that_are_refused(period: Any) -> None:
    assert _refusal(_body(_metric(["NS", "M", {"period": period}]))) == _invalid(f"{W} metric 0: period {period!r}")


def test_metric_ids_must_be_unique_and_start_with_a_lowercase_letter() -> None:
    w = _metric(["NS", "M", {"id": "m1"}], ["NS", "M", {"id": "m1"}], ["NS", "M", {"id": "M2"}],
                ["NS", "M", {"id": "mA_9"}], ["NS", "M", {"id": 3}])  # fmt: skip
    assert _refusal(_body(w)) == _invalid(
        f"{W}: metric id 'm1' used twice",
        f"{W}: metric id 'M2' must start with a lowercase letter",
        f"{W}: metric id 3 must start with a lowercase letter",
    )


def test_an_expression_may_only_name_ids_of_its_widget() -> None:
    ok = _body(_metric(["NS", "M", {"id": "mA"}], [{"expression": "RATE(mA)/2", "id": "e1"}]))
    assert dashboard.validate_dashboard(ok) is ok
    bad = _metric(["NS", "M", {"id": "m1"}], [{"expression": "mB/m1 + x_2", "id": "e1"}])
    assert _refusal(_body(bad)) == _invalid(
        f"{W} metric 1: expression refers to unknown id 'mB'", f"{W} metric 1: expression refers to unknown id 'x_2'"
    )


@pytest.mark.parametrize("entry", [[], "NS", {"expression": "m1"}])
def test_each_metric_must_be_a_non_empty_array_and_the_rest_are_still_checked(entry: Any) -> None:
    w = _metric(entry, ["NS"])
    assert _refusal(_body(w)) == _invalid(
        f"{W} metric 0: must be a non-empty array",
        f"{W} metric 1: expected [namespace, name, dim, value, ..., {{options}}]",
    )


@pytest.mark.parametrize(
    "entry",
    [[{"id": "e1"}], [{"expression": "  ", "id": "e1"}], [{"expression": 5, "id": "e1"}], [{}]],
    ids=["no expression", "blank", "not text", "empty"],
)
def test_an_options_only_entry_needs_an_expression(entry: list[Any]) -> None:
    assert _refusal(_body(_metric(entry))) == _invalid(f"{W} metric 0: needs namespace and name, or an expression")


def test_an_expressions_options_are_checked_and_it_needs_an_id() -> None:
    bad = _metric(["NS", "M", {"id": "m1"}], [{"expression": "m1", "id": "e1", "foo": 1, "Stat": "p50"}])
    assert _refusal(_body(bad)) == _invalid(f"{W} metric 1: unknown options ['Stat', 'foo']")
    no_id = _metric(["NS", "M", {"id": "m1"}], [{"expression": "m1"}])
    assert _refusal(_body(no_id)) == _invalid(f"{W} metric 1: an expression needs an id")


@pytest.mark.parametrize(
    "entry",
    [["NS"], ["NS", "M", "D"], ["NS", 5], ["NS", "M", "D", ""], ["my expression", "M", "D"], [5]],
)
def test_a_metric_array_needs_namespace_name_and_dimension_pairs_of_text(entry: list[Any]) -> None:
    assert _refusal(_body(_metric(entry))) == _invalid(
        f"{W} metric 0: expected [namespace, name, dim, value, ..., {{options}}]"
    )


def test_thirty_dimensions_are_allowed_and_thirty_one_are_not() -> None:
    dims30 = [x for d in range(30) for x in (f"D{d}", "v")]
    ok = _body(_metric(["NS", "M", *dims30], ["NS", "M", *dims30, {"stat": "p50"}]))
    assert dashboard.validate_dashboard(ok) is ok
    assert _refusal(_body(_metric(["NS", "M", *dims30, "D30", "v"]))) == _invalid(
        f"{W} metric 0: more than 30 dimensions"
    )


def test_a_metrics_options_stat_and_period_are_checked() -> None:
    w = _metric(
        ["NS", "M", {"stat": "median"}], ["NS", "M", {"period": 7}], ["NS", "M", {"Stat": "p50", "color": "#fff"}],
        ["NS", "M", {"label": "no stat"}],
    )  # fmt: skip
    assert _refusal(_body(w)) == _invalid(
        f"{W} metric 0: stat 'median'", f"{W} metric 1: period 7", f"{W} metric 2: unknown options ['Stat']"
    )


def test_problems_of_a_later_metric_widget_name_its_index() -> None:
    body = _body(_text(), _metric(["NS"]) | {"y": 1})
    assert _refusal(body) == _invalid("widget 1 metric 0: expected [namespace, name, dim, value, ..., {options}]")


def test_the_validator_does_not_change_the_body_it_is_given() -> None:
    body = _body(_metric(["NS", "M", {"id": "m1"}], [{"expression": "m1", "id": "e1"}]), start="-PT1H", end="P0D")
    before = copy.deepcopy(body)
    dashboard.validate_dashboard(body)
    assert body == before


# ---- the body build_dashboard makes ---------------------------------------------------------------------------

START = 1_790_000_000.0  # 2026-09-21T14:13:20Z
END = START + 100


def _run(**kw: Any) -> DashboardRun:
    fields: dict[str, Any] = {"run_id": "r1", "config_label": "cfg/k7", "levels": ["c4"], "prompt_classes": [],
                              "variants": ["baseline", "speculative"], "start": START, "end": END,
                              "has_acceptance": True, "markdown": "# r1\n\nwhat ran"}  # fmt: skip
    return DashboardRun(**(fields | kw))


def _build(*runs: DashboardRun) -> dict[str, Any]:
    return dashboard.build_dashboard(list(runs), namespace="Spectrn", region="eu-west-1")


def test_the_whole_body_of_a_one_level_run_with_acceptance_and_goodput() -> None:
    run = _run(goodput={("c4", "all", "speculative"): ["GoodputRequests", "GoodputShare"]})
    b = ["RunId", "r1", "Config", "cfg/k7", "Load", "c4", "Variant", "baseline"]
    s = ["RunId", "r1", "Config", "cfg/k7", "Load", "c4", "Variant", "speculative"]
    blue, orange = "#1f77b4", "#ff7f0e"

    def panel(x: int, y: int, title: str, metrics: list[list[Any]]) -> dict[str, Any]:
        return {
            "type": "metric", "x": x, "y": y, "width": 6, "height": 6,
            "properties": {"title": f"all · c4 · {title}", "view": "bar", "region": "eu-west-1", "metrics": metrics,
                           "stat": "p50", "period": 60, "setPeriodToTimeRange": True, "liveData": False},
        }  # fmt: skip

    expected = {
        "widgets": [
            {"type": "text", "x": 0, "y": 0, "width": 24, "height": 7, "properties": {"markdown": "# r1\n\nwhat ran"}},
            panel(0, 7, "TTFT (s)", [
                ["Spectrn", "TTFT", *b, {"stat": "p50", "label": "baseline p50", "color": blue}],
                ["Spectrn", "TTFT", *b, {"stat": "p90", "label": "baseline p90", "color": blue}],
                ["Spectrn", "TTFT", *b, {"stat": "p99", "label": "baseline p99", "color": blue}],
                ["Spectrn", "TTFT", *s, {"stat": "p50", "label": "speculative p50", "color": orange}],
                ["Spectrn", "TTFT", *s, {"stat": "p90", "label": "speculative p90", "color": orange}],
                ["Spectrn", "TTFT", *s, {"stat": "p99", "label": "speculative p99", "color": orange}],
            ]),
            panel(6, 7, "TPOT (s)", [
                ["Spectrn", "TPOT", *b, {"stat": "p50", "label": "baseline p50", "color": blue}],
                ["Spectrn", "TPOT", *b, {"stat": "p90", "label": "baseline p90", "color": blue}],
                ["Spectrn", "TPOT", *b, {"stat": "p99", "label": "baseline p99", "color": blue}],
                ["Spectrn", "TPOT", *s, {"stat": "p50", "label": "speculative p50", "color": orange}],
                ["Spectrn", "TPOT", *s, {"stat": "p90", "label": "speculative p90", "color": orange}],
                ["Spectrn", "TPOT", *s, {"stat": "p99", "label": "speculative p99", "color": orange}],
            ]),
            panel(12, 7, "per-token ITL (s)", [
                ["Spectrn", "ITL", *b, {"stat": "p50", "label": "baseline p50", "color": blue}],
                ["Spectrn", "ITL", *b, {"stat": "p90", "label": "baseline p90", "color": blue}],
                ["Spectrn", "ITL", *b, {"stat": "p99", "label": "baseline p99", "color": blue}],
                ["Spectrn", "ITL", *s, {"stat": "p50", "label": "speculative p50", "color": orange}],
                ["Spectrn", "ITL", *s, {"stat": "p90", "label": "speculative p90", "color": orange}],
                ["Spectrn", "ITL", *s, {"stat": "p99", "label": "speculative p99", "color": orange}],
            ]),
            panel(18, 7, "e2e latency (s)", [
                ["Spectrn", "E2ELatency", *b, {"stat": "p50", "label": "baseline p50", "color": blue}],
                ["Spectrn", "E2ELatency", *b, {"stat": "p90", "label": "baseline p90", "color": blue}],
                ["Spectrn", "E2ELatency", *b, {"stat": "p99", "label": "baseline p99", "color": blue}],
                ["Spectrn", "E2ELatency", *s, {"stat": "p50", "label": "speculative p50", "color": orange}],
                ["Spectrn", "E2ELatency", *s, {"stat": "p90", "label": "speculative p90", "color": orange}],
                ["Spectrn", "E2ELatency", *s, {"stat": "p99", "label": "speculative p99", "color": orange}],
            ]),
            panel(0, 13, "output throughput (tok/s per request)", [
                ["Spectrn", "OutputThroughput", *b, {"stat": "p50", "label": "baseline p50", "color": blue}],
                ["Spectrn", "OutputThroughput", *b, {"stat": "Average", "label": "baseline Average", "color": blue}],
                ["Spectrn", "OutputThroughput", *s, {"stat": "p50", "label": "speculative p50", "color": orange}],
                ["Spectrn", "OutputThroughput", *s,
                 {"stat": "Average", "label": "speculative Average", "color": orange}],
            ]),
            # the baseline has no acceptance: its tokens per chunk stand in
            panel(6, 13, "acceptance", [
                ["Spectrn", "TokensPerChunk", *b,
                 {"stat": "Average", "label": "baseline tokens per chunk", "color": blue}],
                ["Spectrn", "AcceptanceRate", *s,
                 {"stat": "Average", "label": "speculative acceptance %", "color": orange}],
                ["Spectrn", "MeanAcceptanceLength", *s,
                 {"stat": "Average", "label": "speculative mean accepted length", "color": orange}],
            ]),
            panel(12, 13, "errors / requests", [
                ["Spectrn", "Errors", *b, {"stat": "Sum", "label": "baseline errors", "color": blue}],
                ["Spectrn", "Errors", *b, {"stat": "SampleCount", "label": "baseline requests", "color": blue}],
                ["Spectrn", "Errors", *s, {"stat": "Sum", "label": "speculative errors", "color": orange}],
                ["Spectrn", "Errors", *s, {"stat": "SampleCount", "label": "speculative requests", "color": orange}],
            ]),
            panel(18, 13, "output tokens per request", [
                ["Spectrn", "OutputTokens", *b, {"stat": "p50", "label": "baseline p50", "color": blue}],
                ["Spectrn", "OutputTokens", *b, {"stat": "Average", "label": "baseline Average", "color": blue}],
                ["Spectrn", "OutputTokens", *s, {"stat": "p50", "label": "speculative p50", "color": orange}],
                ["Spectrn", "OutputTokens", *s, {"stat": "Average", "label": "speculative Average", "color": orange}],
            ]),
            {
                "type": "metric", "x": 0, "y": 19, "width": 16, "height": 3,
                "properties": {
                    "title": "all · c4 · speedups over the run (baseline / speculative; > 1 = faster)",
                    "view": "singleValue", "region": "eu-west-1",
                    "metrics": [
                        ["Spectrn", "TPOT", *b, {"stat": "p50", "id": "m0", "visible": False}],
                        ["Spectrn", "TPOT", *s, {"stat": "p50", "id": "m1", "visible": False}],
                        [{"expression": "m0/m1", "label": "TPOT p50 speedup", "id": "e2"}],
                        ["Spectrn", "ITL", *b, {"stat": "p50", "id": "m3", "visible": False}],
                        ["Spectrn", "ITL", *s, {"stat": "p50", "id": "m4", "visible": False}],
                        [{"expression": "m3/m4", "label": "ITL p50 speedup", "id": "e5"}],
                        ["Spectrn", "E2ELatency", *b, {"stat": "p50", "id": "m6", "visible": False}],
                        ["Spectrn", "E2ELatency", *s, {"stat": "p50", "id": "m7", "visible": False}],
                        [{"expression": "m6/m7", "label": "e2e p50 speedup", "id": "e8"}],
                        ["Spectrn", "TTFT", *b, {"stat": "p50", "id": "m9", "visible": False}],
                        ["Spectrn", "TTFT", *s, {"stat": "p50", "id": "m10", "visible": False}],
                        [{"expression": "m9/m10", "label": "TTFT p50 speedup", "id": "e11"}],
                        # throughput: higher is better, so speculative over baseline
                        ["Spectrn", "OutputThroughput", *b, {"stat": "p50", "id": "m12", "visible": False}],
                        ["Spectrn", "OutputThroughput", *s, {"stat": "p50", "id": "m13", "visible": False}],
                        [{"expression": "m13/m12", "label": "throughput p50 gain", "id": "e14"}],
                    ],
                    "period": 60, "setPeriodToTimeRange": True, "liveData": False,
                },
            },
            {
                "type": "metric", "x": 16, "y": 19, "width": 8, "height": 3,
                "properties": {
                    "title": "all · c4 · goodput (meets every per-request SLO)",
                    "view": "singleValue", "region": "eu-west-1",
                    "metrics": [
                        ["Spectrn", "GoodputRequests", *s,
                         {"stat": "Average", "label": "speculative goodput req/s", "color": orange}],
                        ["Spectrn", "GoodputShare", *s,
                         {"stat": "Average", "label": "speculative % within SLO", "color": orange}],
                    ],
                    "period": 60, "setPeriodToTimeRange": True, "liveData": False,
                },
            },
        ],
        # a minute before the start, two after the end
        "start": "2026-09-21T14:12:20.000Z",
        "end": "2026-09-21T14:17:00.000Z",
        "periodOverride": "inherit",
    }  # fmt: skip
    assert _build(run) == expected


def test_a_run_without_text_gets_a_heading_and_without_acceptance_its_tokens_per_chunk() -> None:
    body = _build(_run(markdown="", has_acceptance=False))
    assert body["widgets"][0]["properties"] == {"markdown": "# spectrn run r1"}
    (acc,) = [w for w in body["widgets"] if w["properties"].get("title") == "all · c4 · acceptance"]
    assert [(m[1], m[-1]["label"]) for m in acc["properties"]["metrics"]] == [
        ("TokensPerChunk", "baseline tokens per chunk"), ("TokensPerChunk", "speculative tokens per chunk")
    ]  # fmt: skip
    # the panels after it are still drawn
    assert [w["properties"]["title"] for w in body["widgets"][7:9]] == [
        "all · c4 · errors / requests", "all · c4 · output tokens per request"
    ]  # fmt: skip


def test_no_run_no_dashboard() -> None:
    with pytest.raises(PublishError) as e:
        dashboard.build_dashboard([], namespace="Spectrn", region="eu-west-1")
    assert str(e.value) == "no run to build a dashboard for"


def test_a_variant_without_a_colour_of_its_own_is_grey_and_goodput_alone_takes_the_whole_row() -> None:
    run = _run(variants=["baseline", "eagle"], goodput={("c4", "all", "eagle"): ["GoodputTokens"]})
    body = _build(run)
    ttft = body["widgets"][1]
    assert ttft["properties"]["title"] == "all · c4 · TTFT (s)"
    assert [(m[-1]["label"], m[-1]["color"]) for m in ttft["properties"]["metrics"]] == [
        ("baseline p50", "#1f77b4"), ("baseline p90", "#1f77b4"), ("baseline p99", "#1f77b4"),
        ("eagle p50", "#7f7f7f"), ("eagle p90", "#7f7f7f"), ("eagle p99", "#7f7f7f"),
    ]  # fmt: skip
    # no speculative variant: no speedup row; the goodput widget alone spans the row
    assert body["widgets"][-1] == {
        "type": "metric", "x": 0, "y": 19, "width": 24, "height": 3,
        "properties": {
            "title": "all · c4 · goodput (meets every per-request SLO)", "view": "singleValue",
            "region": "eu-west-1",
            "metrics": [["Spectrn", "GoodputTokens", "RunId", "r1", "Config", "cfg/k7", "Load", "c4", "Variant",
                         "eagle", {"stat": "Average", "label": "eagle goodput tok/s", "color": "#7f7f7f"}]],
            "period": 60, "setPeriodToTimeRange": True, "liveData": False,
        },
    }  # fmt: skip
    assert len(body["widgets"]) == 10


def _sweep() -> dict[str, Any]:
    # c: only c8, no classes, baseline alone; a: c8 with "agent"; b: c2 and c8 with "closed"
    c = _run(config_label="c", levels=["c8"], variants=["baseline"])
    a = _run(config_label="a", levels=["c8"], prompt_classes=["agent"],
             goodput={("c8", "agent", "speculative"): ["GoodputShare"]})  # fmt: skip
    b = _run(config_label="b", levels=["c2", "c8"], prompt_classes=["closed"])
    return _build(c, a, b)


def test_a_sweeps_rows_leave_out_what_no_config_ran_and_keep_no_gap_for_it() -> None:
    body = _sweep()
    rows = [(w["properties"]["title"], w["y"]) for w in body["widgets"][1:] if w["x"] == 0]
    speed, good = (
        "speedups over the run (baseline / speculative; > 1 = faster)",
        "goodput (meets every per-request SLO)",
    )
    # levels in load order, "all" then the classes; (c2, agent) is nobody's: no row for it, and no gap, and the
    # class after it (c2, closed) still has its row
    assert rows == [
        ("all · c2 · TTFT (s)", 7), ("all · c2 · output throughput (tok/s per request)", 13),
        (f"all · c2 · {speed}", 19),
        ("closed · c2 · TTFT (s)", 22), ("closed · c2 · output throughput (tok/s per request)", 28),
        (f"closed · c2 · {speed}", 34),
        ("all · c8 · TTFT (s)", 37), ("all · c8 · output throughput (tok/s per request)", 43),
        (f"all · c8 · {speed}", 49),
        ("agent · c8 · TTFT (s)", 52), ("agent · c8 · output throughput (tok/s per request)", 58),
        (f"agent · c8 · {speed}", 64),
        ("closed · c8 · TTFT (s)", 67), ("closed · c8 · output throughput (tok/s per request)", 73),
        (f"closed · c8 · {speed}", 79),
    ]  # fmt: skip
    assert [(w["properties"]["title"], w["x"], w["y"], w["width"]) for w in body["widgets"] if w["y"] == 64] == [
        (f"agent · c8 · {speed}", 0, 64, 16), (f"agent · c8 · {good}", 16, 64, 8)
    ]  # fmt: skip
    assert len(body["widgets"]) == 1 + 5 * 9 + 1


def _series(body: dict[str, Any], title: str) -> list[tuple[Any, ...]]:
    (w,) = [w for w in body["widgets"] if w["properties"].get("title") == title]
    return [
        (*m[2:-1], m[-1].get("label"), m[-1].get("color"))
        for m in w["properties"]["metrics"]
        if m[-1].get("stat") == "p50"
    ]


def test_a_sweeps_panels_show_each_config_that_ran_the_scope_in_its_own_colour() -> None:
    body = _sweep()
    dims = {k: ["RunId", "r1", "Config", k] for k in "abc"}
    assert _series(body, "all · c2 · TTFT (s)") == [
        (*dims["b"], "Load", "c2", "Variant", "baseline", "b baseline p50", "#1f77b4"),
        (*dims["b"], "Load", "c2", "Variant", "speculative", "b speculative p50", "#ff7f0e"),
    ]
    assert _series(body, "all · c8 · TTFT (s)") == [
        (*dims["c"], "Load", "c8", "Variant", "baseline", "c baseline p50", "#1f77b4"),
        (*dims["a"], "Load", "c8", "Variant", "baseline", "a baseline p50", "#1f77b4"),
        (*dims["a"], "Load", "c8", "Variant", "speculative", "a speculative p50", "#ff7f0e"),
        (*dims["b"], "Load", "c8", "Variant", "baseline", "b baseline p50", "#1f77b4"),
        (*dims["b"], "Load", "c8", "Variant", "speculative", "b speculative p50", "#2ca02c"),
    ]
    assert _series(body, "closed · c8 · TTFT (s)") == [
        (*dims["b"], "Load", "c8", "Variant", "baseline", "PromptClass", "closed", "b baseline p50", "#1f77b4"),
        (*dims["b"], "Load", "c8", "Variant", "speculative", "PromptClass", "closed", "b speculative p50", "#ff7f0e"),
    ]


def test_a_sweeps_speedups_come_from_the_configs_that_ran_both_variants_named_by_config() -> None:
    body = _sweep()
    (w,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith("all · c8 · speedups")]
    exprs = [(m[0]["expression"], m[0]["id"], m[0]["label"]) for m in w["properties"]["metrics"] if len(m) == 1]
    assert exprs == [
        ("m0/m1", "e2", "a TPOT p50 speedup"), ("m3/m4", "e5", "a ITL p50 speedup"),
        ("m6/m7", "e8", "a e2e p50 speedup"),
        ("m9/m10", "e11", "a TTFT p50 speedup"), ("m13/m12", "e14", "a throughput p50 gain"),
        ("m15/m16", "e17", "b TPOT p50 speedup"), ("m18/m19", "e20", "b ITL p50 speedup"),
        ("m21/m22", "e23", "b e2e p50 speedup"), ("m24/m25", "e26", "b TTFT p50 speedup"),
        ("m28/m27", "e29", "b throughput p50 gain"),
    ]  # fmt: skip
    (w,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith("closed · c8 · speedups")]
    assert [m[2:-1] for m in w["properties"]["metrics"][:2]] == [
        ["RunId", "r1", "Config", "b", "Load", "c8", "Variant", "baseline", "PromptClass", "closed"],
        ["RunId", "r1", "Config", "b", "Load", "c8", "Variant", "speculative", "PromptClass", "closed"],
    ]
    assert len(w["properties"]["metrics"]) == 15
    (g,) = [
        w
        for w in body["widgets"]
        if w["properties"].get("title") == "agent · c8 · goodput (meets every per-request SLO)"
    ]
    assert g["properties"]["metrics"] == [
        ["Spectrn", "GoodputShare", "RunId", "r1", "Config", "a", "Load", "c8", "Variant", "speculative",
         "PromptClass", "agent", {"stat": "Average", "label": "a speculative % within SLO", "color": "#ff7f0e"}],
    ]  # fmt: skip


# ---- the run's text widget and its view of a run folder -------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    return RunFolder.open(make_run(tmp_path_factory.mktemp("dash"), per_class=2))


def _edited(s: Summary, *, open_sp: Speedups | None, acc: Any, spec: bool = True) -> Summary:
    lv = s.levels[0]
    classes = {"open": lv.by_prompt_class["open"].model_copy(update={"speedup": open_sp}),
               "structured": lv.by_prompt_class["structured"].model_copy(update={"speedup": None})}  # fmt: skip
    variants = dict(lv.variants)
    if spec:
        variants["speculative"] = variants["speculative"].model_copy(update={"acceptance": acc})
    else:
        del variants["speculative"]
    lv = lv.model_copy(update={"by_prompt_class": classes, "variants": variants})
    verdict = Verdict(clean=False, performance=False, reasons=["too short", "cpu"])
    return s.model_copy(update={"levels": [lv], "verdict": verdict})


HEAD = [
    "# spectrn run run-1",
    "target **qwen3-32b**, draft **qwen3-1.7b**, window **7**, mode fused, trn2.48xlarge TP32, max-num-seqs 4; "
    "prompts structured, 32 requests per endpoint, max_tokens 600, temperature 0.0",
    "**NOT A PERFORMANCE RESULT:** too short; cpu",
]


def test_the_text_widget_whole_with_missing_speedups_acceptance_length_and_six_warnings(
    folder: RunFolder, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = ensure_summary(folder)
    acc = s.levels[0].variants["speculative"].acceptance
    assert acc is not None
    edited = _edited(
        s, open_sp=Speedups(tpot_p50=Speedup(value=1.5), throughput=Speedup(value=2.0)),
        acc=acc.model_copy(update={"rate": 0.5, "mean_accepted_length": None}),
    )  # fmt: skip
    monkeypatch.setattr(Summary, "warnings", lambda self: ["w1", "w2", "w3", "w4", "w5", "w6"])
    assert dashboard.run_markdown(folder.meta.config, edited) == "\n".join([
        *HEAD,
        "",
        "| prompt class | TPOT p50 speedup | ITL p50 | e2e p50 | throughput |",
        "|---|---|---|---|---|",
        "| open | 1.50x | n/a | n/a | 2.00x |",
        "\nacceptance (counters) rate 50.0 %, mean acceptance length n/a",
        "\n**not clean:** w1; w2; w3; w4; w5",
    ])  # fmt: skip


def test_the_text_widget_without_a_speculative_variant_or_an_acceptance_rate(folder: RunFolder) -> None:
    s = ensure_summary(folder)
    acc = s.levels[0].variants["speculative"].acceptance
    assert acc is not None
    for edited in (_edited(s, open_sp=None, acc=None, spec=False),
                   _edited(s, open_sp=None, acc=acc.model_copy(update={"rate": None}))):  # fmt: skip
        lines = dashboard.run_markdown(folder.meta.config, edited).split("\n")
        # no speedup row: no table; no acceptance line; the warnings of the real summary (the first five)
        assert lines[:3] == HEAD
        assert lines[3:] == ["", "**not clean:** " + "; ".join(s.warnings()[:5])]


def test_a_run_with_no_completed_request_spans_its_metas_start_to_finish(folder: RunFolder, tmp_path: Path) -> None:
    copy_dir = tmp_path / "run-1"
    shutil.copytree(folder.path, copy_dir)
    summary = json.loads((copy_dir / "summary.json").read_text())
    summary["time_range"] = None  # what analyze writes when no request completed
    (copy_dir / "summary.json").write_text(json.dumps(summary))
    run = RunFolder.open(copy_dir)
    view = dashboard.dashboard_run(run, time_shift_s=10.0)
    assert run.meta.finished_at is not None and run.meta.finished_at > run.meta.started_at
    assert (view.start, view.end) == (run.meta.started_at + 10.0, run.meta.finished_at + 10.0)
