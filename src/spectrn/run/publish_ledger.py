"""``publish.json``: the typed CloudWatch publish ledger of a run folder (``PublishLedger``), read leniently.

One entry per (namespace, target) a run was published to: the content hash of every PutMetricData call
CloudWatch accepted, so a re-run sends only what is missing (CloudWatch has no idempotency token and keeps every
sample it accepted). Written by ``spectrn.publish.publisher`` through ``RunFolder``; its JSON Schema is
published in ``docs/schemas/publish.schema.json``.

Versions: 1 spelled its version ``version`` (spectrn 0.1.0 before this model); 2 is ``schema_version``, same
layout. A version-1 ledger is read as version 2; a ledger from a newer spectrn is an error.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from spectrn.errors import PublishError, one_line
from spectrn.run.summary import Contract
from spectrn.run.versions import versioned_document

LEDGER_SCHEMA_VERSION = 2
_FIX = "restore it, or delete it and publish with --force knowing that already sent data is counted twice"


class SentCall(Contract):
    """One PutMetricData call CloudWatch accepted."""

    index: int = Field(description="The batch's position in the publish plan.")
    datums: int = Field(description="MetricDatum entries in the call.")
    sent_at: str = Field(description="When it was accepted (UTC, ISO 8601).")


class LastError(Contract):
    """Why the last publish attempt to this target stopped."""

    batch: int = Field(description="The batch that failed.")
    message: str = Field(description="CloudWatch's (or the client's) error.")
    at: str = Field(description="When (UTC, ISO 8601).")


class DashboardRecord(Contract):
    """The dashboard put for this run."""

    name: str = Field(description="Dashboard name.")
    published_at: str = Field(description="When (UTC, ISO 8601).")


class PublishTarget(Contract):
    """A run's publish to one CloudWatch namespace at one target (region and endpoint)."""

    namespace: str = Field(description="CloudWatch namespace.")
    target: str = Field(description="Region and endpoint, credentials removed.")
    sent: dict[str, SentCall] = Field(default_factory=dict, description="Content hash -> the accepted call.")
    run_id: str | None = Field(default=None, description="The RunId dimension the datums carried.")
    plan_digest: str | None = Field(default=None, description="Hash of every batch's hash: the publish plan.")
    batches: int | None = Field(default=None, description="Calls in the plan.")
    datums: int | None = Field(default=None, description="MetricDatum entries in the plan.")
    samples: int | None = Field(default=None, description="Samples (values x counts) in the plan.")
    time_shift_s: float = Field(
        default=0.0, allow_inf_nan=False, description="Seconds added to every timestamp (--retime); 0: none."
    )
    max_datums_per_call: int | None = Field(default=None, description="Batch size the hashes were made with.")
    storage_resolution: int | None = Field(default=None, description="CloudWatch storage resolution (1 or 60 s).")
    nonfinite_dropped: list[str] = Field(
        default_factory=list, description="Non-finite values dropped (--skip-nonfinite), one line each."
    )
    updated_at: str | None = Field(default=None, description="When the plan was last recorded (UTC, ISO 8601).")
    last_error: LastError | None = Field(default=None, description="Set while the last attempt failed.")
    dashboard: DashboardRecord | None = Field(default=None, description="The dashboard, once put.")


class PublishLedger(Contract):
    """``publish.json``: every target a run was published to, with the calls each accepted."""

    schema_version: int = Field(
        default=LEDGER_SCHEMA_VERSION, description="Version of the ledger's layout (version 1 spelled it 'version')."
    )
    targets: dict[str, PublishTarget] = Field(
        default_factory=dict, description="namespace@target -> the publish to it."
    )


def read_publish_ledger(raw: Any, where: str) -> PublishLedger:
    """A ``publish.json`` document of any version up to this spectrn's; PublishError naming the fix otherwise."""
    data = versioned_document(
        raw, where, newest=LEDGER_SCHEMA_VERSION, schema="ledger", error=PublishError, hint=_FIX,
        upgrade="publish this run again", legacy_key="version",
    )  # fmt: skip
    try:
        return PublishLedger.model_validate(data)
    except ValidationError as e:
        raise PublishError(
            f"{where} has an unknown layout (each target must be an object with a 'sent' map): {one_line(e)}",
            hint=_FIX,
        ) from None
