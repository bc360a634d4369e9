"""A server-declared draft name reaches CloudWatch only as a valid dimension value: in the datums, the EMF file
and the dashboard (docs/reliability.md, "CloudWatch dimension values").

The draft enters through ``run.json`` as an older spectrn (before names were sanitized on entry) or a hand edit
left it: control characters, a terminal escape, a bidi override and non-ASCII letters. The run is published with
the real CLI to a local CloudWatch (moto); every dimension value that arrived is checked against the rules of
the API (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_Dimension.html): ASCII, no
control characters, at least one non-whitespace character, 1 to 1024 characters.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from doubles.cwfakes import REGION
from doubles.runfactory import make_run
from support import run_cli

DRAFT = "dr\x1b]0;owned\x07aft\u202e\u00e9\u4e2d\n\tname\x7f"


def _obeys_api_dimension(value: object) -> bool:
    return (
        isinstance(value, str)
        and 1 <= len(value) <= 1024
        and all(" " <= ch <= "~" for ch in value)  # ASCII without control characters (DEL included)
        and bool(value.strip())
    )


def _hostile_run(tmp_path: Path) -> Path:
    run_dir = make_run(tmp_path, "hostile", per_class=3, start=time.time() - 2 * 3600)
    meta = json.loads((run_dir / "run.json").read_text())
    meta["provenance"] = {"servers": {"speculative": {"draft": DRAFT, "window": 5, "source": "server"}}}
    (run_dir / "run.json").write_text(json.dumps(meta))
    (run_dir / "summary.json").unlink()
    return run_dir


def _dashboard_dimension_values(body: dict[str, Any]) -> list[Any]:
    """The values of every dimension named in a metric widget's metric arrays (namespace, name, then pairs)."""
    values = []
    for w in body["widgets"]:
        for entry in w.get("properties", {}).get("metrics", []):
            pairs = [x for x in entry if not isinstance(x, dict)][2:]
            values += pairs[1::2]
    return values


def test_a_hostile_draft_name_reaches_cloudwatch_emf_and_dashboard_as_valid_dimension_values(
    capsys, tmp_path: Path, moto_url: str, cw_client: Any
) -> None:
    run_dir = _hostile_run(tmp_path)
    code, _, err = run_cli(["analyze", run_dir, "--no-report"], capsys)
    assert code == 0, err
    code, _, err = run_cli(["publish", run_dir, "--endpoint-url", moto_url, "--region", REGION], capsys)
    assert code == 0, err

    pages = cw_client.get_paginator("list_metrics").paginate(Namespace="Spectrn")
    arrived = [d["Value"] for page in pages for m in page["Metrics"] for d in m["Dimensions"]]
    assert arrived, "nothing was published"
    configs = {d for d in arrived if d.startswith("dr")}
    assert configs and all(_obeys_api_dimension(v) for v in configs), configs  # the draft arrived, made safe
    assert [v for v in arrived if not _obeys_api_dimension(v)] == []

    emf = [json.loads(line) for line in (run_dir / "metrics.emf.jsonl").read_text().splitlines()]
    names = {
        n for doc in emf for dims in doc["_aws"]["CloudWatchMetrics"] for ds in [dims["Dimensions"]] for n in ds[0]
    }
    emf_values = [doc[n] for doc in emf for n in names if n in doc]
    assert emf_values and [v for v in emf_values if not _obeys_api_dimension(v)] == []

    names_in_dashboards = [e["DashboardName"] for e in cw_client.list_dashboards()["DashboardEntries"]]
    assert names_in_dashboards
    for name in names_in_dashboards:
        body = json.loads(cw_client.get_dashboard(DashboardName=name)["DashboardBody"])
        values = _dashboard_dimension_values(body)
        assert values and [v for v in values if not _obeys_api_dimension(v)] == []
