"""What the vLLM container asks of its Neuron host: capabilities added to it, and in DRA modes the host Neuron
driver versions its devices may come from (docs/kubernetes.md, docs/neuron.md "Host driver")."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from spectrn.configuration.base import Strict

# A Linux capability as Kubernetes spells it (no CAP_ prefix): upper-case letters, digits, underscores.
_CAPABILITY = re.compile(r"[A-Z][A-Z0-9_]{1,31}")
# neuronDriverVersion is a dotted version string ('2.25.4.0' in the Neuron DRA docs); digits and dots only, so a
# version can sit inside a CEL string literal without escaping.
_DRIVER_VERSION = re.compile(r"\d{1,4}(\.\d{1,6}){1,3}")
_DRIVER_ATTRIBUTE = "device.attributes['neuron.aws.com'].neuronDriverVersion"
# The capabilities the Pod Security Standards' baseline level lets a container add (kubernetes.io, "Pod Security
# Standards", Baseline, Capabilities); adding any other makes the pod privileged-level.
PSS_BASELINE_CAPABILITIES = frozenset(
    ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP",
     "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
)  # fmt: skip


class Capabilities(Strict):
    add: list[str] = Field(
        default_factory=list,
        max_length=16,
        description=(
            "Linux capabilities added to the vLLM container (runtime neuron) on top of drop: [ALL]; Kubernetes "
            "names without CAP_, e.g. [IPC_LOCK, SYS_ADMIN], as the Neuron DLC quickstart passes to docker "
            "(--cap-add). Default none: AWS's EKS examples run Neuron inference pods without added capabilities; "
            "add these if the Neuron runtime fails to initialise. ALL is refused. See docs/kubernetes.md."
        ),
    )

    @field_validator("add")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if name.upper() == "ALL":
                raise ValueError(
                    "ALL would give the container every capability (as privileged as the host allows); name the "
                    "ones the Neuron runtime needs, e.g. [IPC_LOCK, SYS_ADMIN]"
                )
            if name.upper().startswith("CAP_"):
                raise ValueError(f"{name!r}: Kubernetes names capabilities without the CAP_ prefix ({name[4:]!r})")
            if not _CAPABILITY.fullmatch(name):
                raise ValueError(f"{name!r} is not a capability name (upper-case, e.g. IPC_LOCK)")
        if len(set(v)) != len(v):
            raise ValueError("a capability is named twice")
        return v


def beyond_baseline(added: list[str]) -> list[str]:
    """The added capabilities that take a pod past the Pod Security Standards' baseline level."""
    return sorted(set(added) - PSS_BASELINE_CAPABILITIES)


class NeuronDriver(Strict):
    versions: list[str] = Field(
        default_factory=list,
        max_length=64,
        description=(
            "DRA modes only: host Neuron driver versions the claim accepts, matched exactly against the DRA "
            "driver's neuronDriverVersion attribute (a string such as '2.30.2.0'). Empty: any. Neuron SDK 2.30+ "
            "images need a host driver newer than 2.26. See docs/neuron.md."
        ),
    )
    cel: str | None = Field(
        default=None,
        max_length=1024,
        description=(
            "DRA modes only: a CEL expression ANDed into the claim's device selector, e.g. "
            "device.attributes['neuron.aws.com'].neuronDriverVersion.matches('^2\\\\.(2[7-9]|[3-9][0-9])\\\\.') "
            "for any driver newer than 2.26. See docs/neuron.md."
        ),
    )

    @field_validator("versions")
    @classmethod
    def _versions(cls, v: list[str]) -> list[str]:
        for version in v:
            if not _DRIVER_VERSION.fullmatch(version):
                raise ValueError(f"{version!r} is not a driver version (dotted digits, e.g. '2.30.2.0')")
        return v

    @field_validator("cel")
    @classmethod
    def _cel(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("empty; leave it out to accept any driver")
        return v

    @property
    def selected(self) -> bool:
        return bool(self.versions) or self.cel is not None

    def expression(self) -> str | None:
        """The CEL clause the claim's selector ANDs in (None: no driver constraint)."""
        parts = []
        if self.versions:
            parts.append(f"{_DRIVER_ATTRIBUTE} in [{', '.join(repr(x) for x in self.versions)}]")
        if self.cel is not None:
            parts.append(f"({self.cel})")
        return " && ".join(parts) or None
