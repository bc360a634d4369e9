"""The price behind every cost figure, with its source, in every output (issue: price with provenance).

The built-in price names its region, date and source page; a price set in the config is named as the run's
own; a region with no built-in price and no price given is refused when the config is loaded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

Run = Callable[..., tuple[int, str, str]]

BENCH = ("bench", "--local", "--requests", "6", "--concurrency", "2", "--time-scale", "0.05", "--max-tokens", "16",
         "--prompts", "all")  # fmt: skip


def _costs(summary: dict[str, object]) -> list[dict[str, object]]:
    out = []
    for lv in summary["levels"]:  # type: ignore[attr-defined]
        for scope in (lv, *lv["by_prompt_class"].values()):
            out += [vs["cost"] for vs in scope["variants"].values()]
    return out


@pytest.mark.slow
def test_builtin_price_is_named_with_region_date_and_source_in_every_output(cli: Run, tmp_path: Path) -> None:
    code, out, err = cli(*BENCH, "--out-dir", str(tmp_path), "--run-id", "p")
    assert code == 0, err
    run = tmp_path / "p"
    costs = _costs(json.loads((run / "summary.json").read_text()))
    assert len(costs) >= 6  # pooled and two classes, two variants
    expected = "$44.70/h (built-in on-demand list price, us-east-2, as of 2026-11-30, " \
        "aws.amazon.com/ec2/pricing/on-demand/)"  # fmt: skip
    assert all(c["price_source"] == expected for c in costs), costs
    line = f"$/M tokens at {expected} x 0.5 instance per service"
    assert line in (out + err).replace("\n", " ") or line in " ".join((out + err).split())
    md = (run / "report" / "summary.md").read_text()
    assert line in md.replace("\\", "")
    html = (run / "report" / "index.html").read_text()
    assert "$/M tokens at $44.70/h (built-in on-demand list price, us-east-2, as of 2026-11-30" in html


@pytest.mark.slow
def test_configured_price_is_used_and_named_as_the_runs_own(cli: Run, tmp_path: Path) -> None:
    code, _, err = cli(*BENCH, "--out-dir", str(tmp_path), "--run-id", "q", "--no-report",
                       "--set", "pricing.region=eu-west-1", "--set", "pricing.instance_hourly_usd=10")  # fmt: skip
    assert code == 0, err
    s = json.loads((tmp_path / "q" / "summary.json").read_text())
    lv = s["levels"][0]
    for v, vs in lv["variants"].items():
        cost = vs["cost"]
        assert cost["price_source"] == "$10.00/h (pricing.instance_hourly_usd, set in the run's config)"
        # the definition: price x share / (tokens/s x 3600) x 1e6, over the pooled throughput
        tok_s = vs["output_tokens_per_s"]["aggregate"]
        assert cost["usd_per_million_output_tokens"] == pytest.approx(10 * 0.5 / (tok_s * 3600) * 1e6), v


def test_region_without_a_builtin_price_is_refused_naming_the_field_and_the_fix(cli: Run) -> None:
    code, out, err = cli("render", "--set", "pricing.region=eu-west-1")
    assert code == 2
    assert "pricing.region: no built-in price for trn2.48xlarge in 'eu-west-1'" in err
    assert "set pricing.instance_hourly_usd" in err and not out
