"""Where and how a run's metrics and dashboards go in CloudWatch (``cloudwatch:`` in the run spec)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from spectrn.configuration.base import AWS_REGION, Strict


class CloudWatchConfig(Strict):
    namespace: str = Field(default="Spectrn", description="CloudWatch metric namespace.")
    region: str | None = Field(default=None, description="AWS region (default: the standard AWS resolution chain).")
    storage_resolution: Literal[1, 60] = Field(
        default=60, description="1 for high-resolution metrics, 60 for standard."
    )
    dashboard_prefix: str = Field(default="spectrn", description="Dashboards are named <prefix>-<run id>.")

    @field_validator("region")
    @classmethod
    def _region(cls, v: str | None) -> str | None:
        if v is not None and not AWS_REGION.fullmatch(v):
            raise ValueError(f"{v!r} is not an AWS region (e.g. us-east-2)")
        return v
