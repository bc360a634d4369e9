"""The dashboard validator rule by rule, and the dashboard body written out whole.

Each refusal case is a hand-made body that breaks exactly one rule of CloudWatch's dashboard body structure
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html)
and the whole message it must raise; the acceptance cases sit on each boundary from the allowed side. Then the
body ``build_dashboard`` makes for a small hand-made run, every widget, metric array and property written out,
and the layout and colours of a sweep whose configs cover different loads and prompt classes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from spectrn.errors import PublishError
from spectrn.publish import dashboard
from spectrn.publish.dashboard import DashboardRun

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
    assert _refusal(_body(_text(), title="x", Variables=[])) == _invalid("unknown top-level keys ['Variables', 'title']")


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


def test_a_widget_needs_an_object_of_properties() -> None:
    w = _text()
    w["properties"] = ["markdown"]
    assert _refusal(_body(w)) == _invalid(f"{W}: 'properties' must be an object")


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
