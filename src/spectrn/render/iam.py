"""The least-privilege IAM policies a configuration's roles need: the S3 volume's and the load pod's.

``spectrn render --s3-policy`` and ``--iam-policy`` print them; nothing here talks to AWS.
"""

from __future__ import annotations

from typing import Any

from spectrn.configuration.config import SpectrnConfig


def s3_iam_policy(cfg: SpectrnConfig) -> dict[str, Any]:
    """Least-privilege IAM policy for the model bucket volume, for the role that mounts it (the Mountpoint
    for S3 CSI driver's role): list the bucket, read weights under ``models_prefix``, and read/write/delete
    compiled artifacts under ``artifacts_prefix`` (the Neuron compiler saves them there; the volume is mounted
    with allow-delete/allow-overwrite for that). Nothing else in the bucket is readable or writable."""
    bucket = f"arn:aws:s3:::{cfg.s3.bucket}"
    models = cfg.s3.models_prefix.strip("/")
    artifacts = cfg.s3.artifacts_prefix.strip("/")
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "SpectrnListModelBucket", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket},
            {
                "Sid": "SpectrnReadModels",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": f"{bucket}/{models}/*",
            },
            {
                "Sid": "SpectrnCompiledArtifacts",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"],
                "Resource": f"{bucket}/{artifacts}/*",
            },
        ],
    }


def iam_policy(cfg: SpectrnConfig) -> dict[str, Any]:
    """Least-privilege IAM policy for the load pod: PutMetricData into ``cloudwatch.namespace`` only and
    spectrn's own dashboards. One definition, shared with ``spectrn publish`` (``spectrn.publish.cloudwatch``)."""
    from spectrn.publish.iam import publish_iam_policy

    return publish_iam_policy(
        cfg.cloudwatch.namespace, cfg.cloudwatch.dashboard_prefix, region=cfg.cloudwatch.region or "*"
    )
