"""The cluster-side settings of the run spec: the model bucket, ServiceAccounts, Secrets, probes, pod resources and
compile Jobs."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from spectrn.configuration.base import AWS_REGION, DNS_SUBDOMAIN, ROLE_ARN, Strict, quantity


class S3Config(Strict):
    bucket: str = Field(
        default="REPLACE-WITH-YOUR-BUCKET",
        description="S3 bucket holding model weights and compiled Neuron artifacts (Mountpoint for S3 volume).",
    )
    region: str = Field(default="us-east-2", description="AWS region of the bucket.")
    models_prefix: str = Field(
        default="models",
        description="Key prefix under which weights live, one folder per Hugging Face id; read-only for the pods. Path segments of letters, digits, '.', '_' or '-' (no wildcards, no '..').",
    )
    artifacts_prefix: str = Field(
        default="compiled",
        description="Key prefix for compiled artifacts, one folder per configuration hash; the only place the pods may write, so it must not contain or sit inside models_prefix. Same rule as models_prefix.",
    )
    mount_path: str = Field(default="/var/mdl", description="Where the bucket is mounted in the vLLM pods.")
    capacity: str = Field(
        default="1200Gi", description="Nominal capacity of the static PersistentVolume (S3 has no real limit)."
    )
    fs_group: int = Field(
        default=1000,
        ge=1,
        le=2_147_483_647,
        description="fsGroup of every pod that mounts the bucket: the Mountpoint for S3 CSI driver v2 then mounts with gid=<fs_group>, allow-other, directories 770 and files 660, so the vLLM container (root with every capability dropped) can write compiled artifacts. See docs/neuron.md.",
    )

    @field_validator("bucket")
    @classmethod
    def _bucket_name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9.\-]{1,61}[a-zA-Z0-9]", v):
            raise ValueError("must be a valid S3 bucket name (3-63 letters, digits, dots, dashes)")
        return v

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not AWS_REGION.fullmatch(v):
            raise ValueError(f"{v!r} is not an AWS region (e.g. us-east-2)")
        return v

    @field_validator("capacity")
    @classmethod
    def _capacity(cls, v: str) -> str:
        return quantity(v)

    @field_validator("mount_path")
    @classmethod
    def _mount_path(cls, v: str) -> str:
        if not v.startswith("/") or v == "/":
            raise ValueError(f"{v!r} must be an absolute folder such as /var/mdl")
        return v


class ServiceAccounts(Strict):
    vllm: str = Field(
        default="spectrn-vllm",
        description="ServiceAccount of the vLLM pods (needs S3 read/write for the model volume).",
    )
    loadgen: str = Field(
        default="spectrn-loadgen",
        description="ServiceAccount of the load Job (needs cloudwatch:PutMetricData only when publishing from the pod).",
    )
    vllm_role_arn: str = Field(
        default="",
        description="IAM role for the vLLM pods (IRSA annotation); empty renders a placeholder comment only.",
    )
    loadgen_role_arn: str = Field(
        default="", description="IAM role for the load Job (IRSA annotation); empty renders no annotation."
    )

    @field_validator("vllm", "loadgen")
    @classmethod
    def _sa_name(cls, v: str) -> str:
        if not DNS_SUBDOMAIN.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid Kubernetes name: use lowercase letters, digits, '-' or '.'")
        return v

    @field_validator("vllm_role_arn", "loadgen_role_arn")
    @classmethod
    def _arn(cls, v: str) -> str:
        if v and not ROLE_ARN.fullmatch(v):
            raise ValueError(f"{v!r} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
        return v


class SecretRef(Strict):
    name: str = Field(description="Kubernetes Secret name.")
    key: str = Field(default="token", description="Key inside the Secret.")

    @field_validator("name")
    @classmethod
    def _secret_name(cls, v: str) -> str:
        if not DNS_SUBDOMAIN.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid Secret name: use the name of an existing Secret")
        return v

    @field_validator("key")
    @classmethod
    def _secret_key(cls, v: str) -> str:
        if not re.fullmatch(r"[-._a-zA-Z0-9]{1,253}", v):
            raise ValueError(f"{v!r} is not a valid Secret key: use letters, digits, '-', '_' or '.'")
        return v


class Probes(Strict):
    startup_budget_s: int = Field(
        default=17100,
        ge=60,
        le=86400,
        description="How long the startup probe allows before Kubernetes restarts the pod (Neuron compilation is slow; the sample allows ~4.75 h).",
    )
    period_s: int = Field(default=30, ge=1, le=600, description="Probe period (seconds).")


class PodResources(Strict):
    cpu: str = Field(default="90", description="CPU request and limit of each vLLM pod.")
    memory: str = Field(default="600Gi", description="Memory request and limit of each vLLM pod.")
    shm_size: str = Field(default="128Gi", description="Size of the /dev/shm memory volume.")
    neuron_devices: int = Field(default=8, ge=1, le=64, description="Neuron devices (chips) per vLLM pod.")

    @field_validator("cpu", "memory", "shm_size")
    @classmethod
    def _quantities(cls, v: str) -> str:
        return quantity(v)


class CompileConfig(Strict):
    cpu: str = Field(
        default="90",
        description="CPU request and limit of each compile Job (`spectrn compile`). The published sample's manifests ask for 90, so two compiles of 8 devices each fit one trn2.48xlarge; its README suggests 190 (the whole node) for a faster compile.",
    )

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, v: str) -> str:
        return quantity(v)
