"""The sweep report's matrix and prediction tables checked cell by cell against rows built here by hand: which
cell goes in which column, the order of the rows (smaller draft first, then smaller window), the digits of each
speedup and interval, and the sign and unit of each prediction error."""

from __future__ import annotations

from spectrn.report.sweep import matrix_table, prediction_rows, shown_scopes
from spectrn.run.sweep_analysis import MatrixRow, PredictionCheck, SweepAnalysis, SweepPrediction


def _row(draft: str, window: int, cls: str, speedup: float, lo: float, hi: float, level: str = "c4") -> MatrixRow:
    return MatrixRow(draft=draft, window=window, level=level, prompt_class=cls, speedup=speedup, ci95=(lo, hi))


def _analysis(rows: list[MatrixRow], classes: list[str]) -> SweepAnalysis:
    """Only the fields the tables read (the analysis's other parts play no role here)."""
    return SweepAnalysis.model_construct(rows=rows, classes=classes)


def test_matrix_puts_each_speedup_in_its_class_column_smaller_draft_then_window_first() -> None:
    rows = [
        _row("org/draft-3b", 2, "open", 1.5, 1.4, 1.6),
        _row("org/draft-1b", 4, "structured", 2.756, 2.5, 3.0),
        _row("org/draft-1b", 4, "open", 1.234, 1.1, 1.3),
        _row("org/draft-1b", 2, "open", 1.1, 0.95, 1.25),
        _row("org/draft-1b", 2, "mix", 1.05, 0.9, 1.2),
        _row("org/draft-1b", 2, "open", 9.9, 9.0, 9.9, level="c8"),  # another level: not in c4's table
    ]
    header, table = matrix_table(_analysis(rows, ["open", "structured"]), "c4")
    assert header == ["draft", "window", "open", "structured", "mix"]
    assert table == [
        ["org/draft-1b", "2", "1.10x [0.95, 1.25]", "-", "1.05x [0.90, 1.20]"],
        ["org/draft-1b", "4", "1.23x [1.10, 1.30]", "2.76x [2.50, 3.00]", "-"],  # 1.234 -> 1.23, 2.756 -> 2.76
        ["org/draft-3b", "2", "1.50x [1.40, 1.60]", "-", "-"],
    ]


def test_one_class_is_shown_alone_and_no_class_as_all() -> None:
    assert shown_scopes(_analysis([], ["open"])) == ["open"]
    # one class: its mix is that class, shown once
    assert shown_scopes(_analysis([_row("d-1b", 2, "mix", 1.0, 0.9, 1.1)], ["open"])) == ["open"]
    assert shown_scopes(_analysis([], [])) == ["all"]
    assert shown_scopes(_analysis([_row("d-1b", 2, "mix", 1.0, 0.9, 1.1)], ["a", "b"])) == ["a", "b", "mix"]


def test_prediction_rows_show_ms_with_two_decimals_and_the_signed_error() -> None:
    pred = SweepPrediction.model_construct(comparison=[
        PredictionCheck(draft="d-1b", prompt_class="open", window=2, predicted_s=0.01234, measured_s=0.0125,
                        error=-0.0128, from_window=8),
        PredictionCheck(draft="d-1b", prompt_class="open", window=8, predicted_s=0.02, measured_s=0.019,
                        error=0.0526, from_window=8, fitted=True),
    ])  # fmt: skip
    assert prediction_rows(pred) == [
        # 0.01234 s -> 12.34 ms; error -0.0128 -> -1.3%
        ["d-1b", "open", "2", "12.34", "12.50", "-1.3%", "predicted from k8"],
        ["d-1b", "open", "8", "20.00", "19.00", "+5.3%", "fitted point"],
    ]
