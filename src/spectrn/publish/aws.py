"""The only module that imports boto3: CloudWatch through the standard credential chain.

A call counts as accepted only when the answer is CloudWatch's: botocore returns normally for any 2xx, even
an HTML page from a proxy or a captive portal (its JSON parser turns a body that is not JSON into
``{'message': body}`` and PutMetricData has no output shape to check), and a batch taken for sent would never
be sent again. So after a 2xx, ``Boto3Sink`` requires a request id (``x-amzn-RequestId`` on the JSON and CBOR
protocols, ``<RequestId>`` on query), a body of the protocol's shape (a JSON object, a CBOR map, XML), and no
HTML content type; anything else is a ``PublishError`` and the batch stays unsent. The content type is not
otherwise required to be one of AWS's (``application/x-amz-json-1.0``, ``application/cbor``, ``text/xml``):
moto, a CloudWatch-compatible server, answers ``content-type: text`` with a correct JSON body.

Region: boto3 resolves it from ``region_name``, ``AWS_DEFAULT_REGION`` or the profile's ``region`` in the
shared config; botocore does not read ``AWS_REGION`` (botocore/configprovider.py
``BOTOCORE_DEFAUT_SESSION_VARIABLES``: ``'region': ('region', 'AWS_DEFAULT_REGION', None, None)``).

Endpoint URLs may carry credentials (``http://user:password@host``): only their redacted form is stored or shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from spectrn.errors import PublishError, redact
from spectrn.run.folder import EMF as EMF_FILE

REGION_HINT = (
    "pass --region, set cloudwatch.region in spectrn.yaml, export AWS_DEFAULT_REGION (boto3 does not read "
    "AWS_REGION), or set region in the AWS profile"
)


class MetricsSink(Protocol):
    """Where datums and dashboards go: CloudWatch through boto3, or a fake in tests."""

    target: str
    region: str  # the dashboard's metric widgets name it

    def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None: ...

    def put_dashboard(self, name: str, body: str) -> list[str]: ...


def aws_available(region: str | None = None) -> tuple[bool, str]:
    """Whether botocore resolves credentials and a region; (False, why) otherwise. Does not call AWS."""
    import boto3

    session = boto3.session.Session(region_name=region)
    if session.get_credentials() is None:
        return False, "no AWS credentials found (environment, shared config/credentials files, SSO, IRSA, IMDS)"
    if not session.region_name:
        return False, "no AWS region configured (--region, cloudwatch.region, AWS_DEFAULT_REGION or the AWS profile)"
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
        hint=f"configure AWS credentials (aws configure, AWS_PROFILE, IRSA) and a region ({REGION_HINT}), "
        f"or use EMF: {where}",
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
            raise PublishError("no AWS region configured", hint=REGION_HINT)
        self.region: str = session.region_name
        # what is stored (publish.json) and shown: never the password of a user:password@ endpoint
        self.endpoint = redact(endpoint_url) if endpoint_url else None
        self.target = f"{self.region}" + (f"@{self.endpoint}" if self.endpoint else "")
        config = Config(
            retries={"mode": "adaptive", "total_max_attempts": max_attempts},  # attempts incl. the first
            connect_timeout=10,
            read_timeout=60,
            user_agent_extra="spectrn",
        )
        self._client = session.client("cloudwatch", endpoint_url=endpoint_url, config=config)
        model = self._client.meta.service_model
        self._protocol = str(getattr(model, "resolved_protocol", None) or model.protocol)
        self._last_http: Any = None
        self._client.meta.events.register("after-call.cloudwatch.*", self._keep_http)

    def _keep_http(self, http_response: Any = None, **_: Any) -> None:
        self._last_http = http_response

    def _call(self, what: str, method: Any, **params: Any) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        self._last_http = None
        try:
            resp: dict[str, Any] = method(**params)
        except ClientError as e:
            err = e.response.get("Error", {})
            raise PublishError(redact(f"{what} failed: {err.get('Code', '?')}: {err.get('Message', e)}")) from e
        except BotoCoreError as e:
            raise PublishError(redact(f"{what} failed: {e}")) from e
        problem = answer_problem(self._protocol, resp, self._last_http)
        if problem:
            where = f" from {self.endpoint}" if self.endpoint else ""
            raise PublishError(
                f"{what}: the answer{where} is not CloudWatch's ({problem}); the call is not counted as sent",
                hint="check --endpoint-url / AWS_ENDPOINT_URL_CLOUDWATCH and any proxy in between "
                "(HTTPS_PROXY); re-run to send what was not accepted",
            )
        return resp

    def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None:
        self._call("PutMetricData", self._client.put_metric_data, Namespace=namespace, MetricData=metric_data)

    def put_dashboard(self, name: str, body: str) -> list[str]:
        resp = self._call(f"PutDashboard {name}", self._client.put_dashboard, DashboardName=name, DashboardBody=body)
        return [f"{m.get('DataPath', '')}: {m.get('Message', '')}" for m in resp.get("DashboardValidationMessages", [])]


def answer_problem(protocol: str, parsed: dict[str, Any], http: Any) -> str:
    """Why a 2xx answer is not a well-formed CloudWatch answer ("" when it is)."""
    meta = parsed.get("ResponseMetadata") or {}
    headers = {str(k).lower(): str(v) for k, v in (meta.get("HTTPHeaders") or {}).items()}
    ctype = headers.get("content-type", "")
    body: bytes = bytes(getattr(http, "content", b"") or b"")
    problems = []
    if "html" in ctype.lower():
        problems.append(f"content type {ctype}")
    if not meta.get("RequestId"):
        problems.append("no request id")
    if http is not None and body.strip() and not _body_fits(protocol, body):
        problems.append(f"a body that is not a {protocol} answer: {body[:80]!r}")
    return "; ".join(problems)


def _body_fits(protocol: str, body: bytes) -> bool:
    """A success body of the protocol: a JSON object, a CBOR map, or an XML document (empty bodies pass)."""
    if protocol in ("json", "rest-json"):
        try:
            return isinstance(json.loads(body), dict)
        except ValueError:
            return False
    if protocol == "smithy-rpc-v2-cbor":
        return 0xA0 <= body[0] <= 0xBF  # CBOR major type 5: a map
    return body.lstrip().startswith(b"<") and b"<html" not in body[:200].lower()
