"""The only module that imports boto3: CloudWatch through the standard credential chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from spectrn.errors import PublishError
from spectrn.run.folder import EMF as EMF_FILE


class MetricsSink(Protocol):
    """Where datums and dashboards go: CloudWatch through boto3, or a fake in tests."""

    target: str

    def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None: ...

    def put_dashboard(self, name: str, body: str) -> list[str]: ...


def aws_available(region: str | None = None) -> tuple[bool, str]:
    """Whether botocore resolves credentials and a region; (False, why) otherwise. Does not call AWS."""
    import boto3

    session = boto3.session.Session(region_name=region)
    if session.get_credentials() is None:
        return False, "no AWS credentials found (environment, shared config/credentials files, SSO, IRSA, IMDS)"
    if not session.region_name:
        return False, "no AWS region configured (--region, cloudwatch.region, AWS_REGION or the shared config)"
    return True, session.region_name


def require_aws(run_dir: Path, region: str | None = None) -> None:
    """Raise ``PublishError`` before any work when botocore finds no credentials or region, pointing at the
    run's EMF file (or at how to write it)."""
    ok, why = aws_available(region)
    if ok:
        return
    emf = Path(run_dir) / EMF_FILE
    where = (
        f"the same metrics are in {emf} (Embedded Metric Format; the CloudWatch agent can ship it)"
        if emf.exists()
        else f"`spectrn publish --emf {run_dir}` writes them to {emf} for the CloudWatch agent"
    )
    raise PublishError(
        f"cannot publish to CloudWatch: {why}",
        hint=f"configure AWS (aws configure, AWS_PROFILE, IRSA) and a region, or use EMF: {where}",
    )


class Boto3Sink:
    """CloudWatch through boto3's standard credential chain and region resolution, adaptive retries."""

    def __init__(self, region: str | None = None, endpoint_url: str | None = None, max_attempts: int = 8) -> None:
        import boto3
        from botocore.config import Config

        session = boto3.session.Session(region_name=region)
        if session.get_credentials() is None:
            raise PublishError(
                "no AWS credentials found by the standard chain (environment, ~/.aws, SSO, web identity/IRSA, "
                "instance metadata)",
                hint="configure credentials (aws configure / AWS_PROFILE / IRSA), or use the Embedded Metric "
                "Format file results/<run-id>/metrics.emf.jsonl with the CloudWatch agent",
            )
        if not session.region_name:
            raise PublishError(
                "no AWS region configured",
                hint="pass --region, set cloudwatch.region in spectrn.yaml, or export AWS_REGION",
            )
        self.region: str = session.region_name
        self.endpoint_url = endpoint_url
        self.target = f"{self.region}" + (f"@{endpoint_url}" if endpoint_url else "")
        config = Config(
            retries={"mode": "adaptive", "total_max_attempts": max_attempts},  # attempts incl. the first
            connect_timeout=10,
            read_timeout=60,
            user_agent_extra="spectrn",
        )
        self._client = session.client("cloudwatch", endpoint_url=endpoint_url, config=config)

    def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.put_metric_data(Namespace=namespace, MetricData=metric_data)
        except ClientError as e:
            err = e.response.get("Error", {})
            raise PublishError(f"PutMetricData failed: {err.get('Code', '?')}: {err.get('Message', e)}") from e
        except BotoCoreError as e:
            raise PublishError(f"PutMetricData failed: {e}") from e

    def put_dashboard(self, name: str, body: str) -> list[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            resp = self._client.put_dashboard(DashboardName=name, DashboardBody=body)
        except ClientError as e:
            err = e.response.get("Error", {})
            raise PublishError(f"PutDashboard {name} failed: {err.get('Code', '?')}: {err.get('Message', e)}") from e
        except BotoCoreError as e:
            raise PublishError(f"PutDashboard {name} failed: {e}") from e
        return [f"{m.get('DataPath', '')}: {m.get('Message', '')}" for m in resp.get("DashboardValidationMessages", [])]
