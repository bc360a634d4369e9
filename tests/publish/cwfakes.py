"""Test doubles for CloudWatch publishing (importable by test modules, unlike conftest.py)."""

from __future__ import annotations

from typing import Any

from spectrn.errors import PublishError

REGION = "us-east-1"


class FakeSink:
    """Records every call; fails PutMetricData calls whose 1-based number is in ``fail_calls``."""

    def __init__(self, fail_calls: set[int] | None = None, region: str = REGION) -> None:
        self.target = f"{region}@fake"
        self.region = region
        self.fail_calls = fail_calls or set()
        self.calls: list[tuple[str, list[dict[str, Any]]]] = []
        self.attempts = 0
        self.dashboards: dict[str, str] = {}

    def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None:
        self.attempts += 1
        if self.attempts in self.fail_calls:
            raise PublishError("PutMetricData failed: InternalFailure: simulated outage")
        self.calls.append((namespace, metric_data))

    def put_dashboard(self, name: str, body: str) -> list[str]:
        self.dashboards[name] = body
        return []
