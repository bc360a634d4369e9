"""``render --s3-policy`` and ``--iam-policy``: the whole least-privilege policies, written out from IAM's ARN formats
(S3: ``arn:aws:s3:::BUCKET`` and ``BUCKET/KEY``; CloudWatch dashboards are global: ``arn:aws:cloudwatch::ACCOUNT:
dashboard/NAME``), so a widened action, a lost prefix or a wrong resource fails."""

from __future__ import annotations

from spectrn.configuration.sources import build_config
from spectrn.render.iam import iam_policy, s3_iam_policy

CFG = build_config(
    {
        "s3": {"bucket": "my-models", "models_prefix": "/Xweights/", "artifacts_prefix": "neuron/cacheX/"},
        "cloudwatch": {"namespace": "Team/SD", "dashboard_prefix": "team"},
    },
    environ={},
)


def test_the_s3_policy_lists_the_bucket_reads_weights_and_manages_only_compiled_artifacts() -> None:
    # prefixes lose their slashes at both ends and nothing else: "/Xweights/" -> "Xweights",
    # "neuron/cacheX/" -> "neuron/cacheX" (an upper-case X at an end shows a strip of more than the slash)
    assert s3_iam_policy(CFG) == {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "SpectrnListModelBucket", "Effect": "Allow", "Action": "s3:ListBucket",
             "Resource": "arn:aws:s3:::my-models"},
            {"Sid": "SpectrnReadModels", "Effect": "Allow", "Action": "s3:GetObject",
             "Resource": "arn:aws:s3:::my-models/Xweights/*"},
            {"Sid": "SpectrnCompiledArtifacts", "Effect": "Allow",
             "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"],
             "Resource": "arn:aws:s3:::my-models/neuron/cacheX/*"},
        ],
    }  # fmt: skip


def test_the_load_pods_policy_puts_metrics_in_its_namespace_and_its_own_dashboards() -> None:
    assert iam_policy(CFG) == {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "SpectrnPutMetricData", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
             "Condition": {"StringEquals": {"cloudwatch:namespace": "Team/SD"}}},
            {"Sid": "SpectrnDashboards", "Effect": "Allow",
             "Action": ["cloudwatch:PutDashboard", "cloudwatch:GetDashboard"],
             "Resource": "arn:aws:cloudwatch::*:dashboard/team-*"},
        ],
    }  # fmt: skip
    # a region set in the config pins the metric calls to it; the defaults are spectrn's namespace and prefix
    pinned = iam_policy(build_config({"cloudwatch": {"region": "eu-west-1"}}, environ={}))
    assert pinned["Statement"][0]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": "Spectrn", "aws:RequestedRegion": "eu-west-1"}
    }
    assert pinned["Statement"][1]["Resource"] == "arn:aws:cloudwatch::*:dashboard/spectrn-*"
