"""The least-privilege IAM policy that publishing needs."""

from __future__ import annotations

import re
from typing import Any

from spectrn.errors import ConfigError
from spectrn.publish.limits import validate_namespace


def publish_iam_policy(namespace: str, dashboard_prefix: str, region: str = "*", account: str = "*") -> dict[str, Any]:
    """Least privilege for ``spectrn publish``: PutMetricData only into ``namespace`` (PutMetricData has no
    resource-level permissions, so the namespace condition key does the scoping) and Put/GetDashboard only
    on dashboards named ``<prefix>-*`` (dashboards are global: their ARN has no region)."""
    validate_namespace(namespace)
    if not re.fullmatch(r"[A-Za-z0-9_-]+", dashboard_prefix):
        raise ConfigError(
            f"cloudwatch.dashboard_prefix={dashboard_prefix!r} may hold only letters, digits, '-' and '_'",
            hint="e.g. spectrn",
        )
    metric_condition: dict[str, Any] = {"StringEquals": {"cloudwatch:namespace": namespace}}
    if region != "*":
        metric_condition["StringEquals"]["aws:RequestedRegion"] = region
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "SpectrnPutMetricData",
                "Effect": "Allow",
                "Action": "cloudwatch:PutMetricData",
                "Resource": "*",
                "Condition": metric_condition,
            },
            {
                "Sid": "SpectrnDashboards",
                "Effect": "Allow",
                "Action": ["cloudwatch:PutDashboard", "cloudwatch:GetDashboard"],
                "Resource": f"arn:aws:cloudwatch::{account}:dashboard/{dashboard_prefix}-*",
            },
        ],
    }
