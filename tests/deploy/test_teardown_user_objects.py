"""Teardown and the objects a user owns in spectrn's namespace: the Hugging Face token Secret must live there
(a pod can only reference a Secret of its own namespace), so teardown must leave it, and the namespace with it;
the token Secrets a cluster creates for service accounts are the cluster's, and do not keep the namespace."""

from __future__ import annotations

import pytest

from doubles.kube_fake import FakeKube
from doubles.kubehelp import make_cfg, run_deploy
from spectrn.deploy.teardown import teardown

HF_SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "type": "Opaque",
    "metadata": {"name": "hf-token", "namespace": "spectrn"},
    "data": {"token": "aGZfeHl6"},
}


@pytest.fixture
def hub_cfg():  # type: ignore[no-untyped-def]
    return make_cfg(model_source="hub", hf_token_secret={"name": "hf-token", "key": "token"})


def _deletes(fake: FakeKube) -> list[str]:
    return [what for op, what in fake.calls if op == "delete"]


def test_the_users_token_secret_survives_and_keeps_the_namespace(fake: FakeKube, hub_cfg) -> None:  # type: ignore[no-untyped-def]
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "spectrn"}})
    fake.put(dict(HF_SECRET))
    run_deploy(fake, hub_cfg)
    server = fake.find("Deployment", "qwen-vllm", "spectrn")
    assert server is not None and "hf-token" in str(server["spec"]["template"])  # the pod does reference it
    result = teardown(fake, hub_cfg)
    assert fake.find("Secret", "hf-token", "spectrn") is not None
    assert not [d for d in _deletes(fake) if "hf-token" in d]
    assert "Secret spectrn/hf-token" not in result.deleted and "Secret hf-token" not in str(result.deleted)
    assert fake.find("Deployment", "qwen-vllm", "spectrn") is None  # spectrn's own objects do go


def test_a_namespace_spectrn_created_is_kept_while_it_holds_the_users_secret(fake: FakeKube, hub_cfg) -> None:  # type: ignore[no-untyped-def]
    """spectrn created the namespace and the user's token Secret lives in it: deleting the namespace would delete
    the Secret with it. (The fake accepts the Secret before its namespace exists; the order does not matter to
    teardown, only that the namespace carries spectrn's label.)"""
    fake.put(dict(HF_SECRET))  # the namespace does not exist yet: deploy creates it, so it is spectrn's
    run_deploy(fake, hub_cfg)
    ns = fake.find("Namespace", "spectrn")
    assert ns is not None and ns["metadata"]["labels"].get("app.kubernetes.io/managed-by") == "spectrn"
    result = teardown(fake, hub_cfg)
    assert fake.find("Namespace", "spectrn") is not None
    assert fake.find("Secret", "hf-token", "spectrn") is not None
    assert any("also holds Secret hf-token" in k for k in result.kept), result.kept
    assert "Namespace spectrn" not in result.deleted
    assert not [d for d in _deletes(fake) if d.startswith("Namespace") or "hf-token" in d]


def test_dry_run_never_lists_the_users_secret(fake: FakeKube, hub_cfg) -> None:  # type: ignore[no-untyped-def]
    fake.put(dict(HF_SECRET))
    run_deploy(fake, hub_cfg)
    result = teardown(fake, hub_cfg, dry_run=True)
    assert not [d for d in result.deleted if "hf-token" in d or d.startswith("Namespace")]
    assert any("also holds Secret hf-token" in k for k in result.kept), result.kept


def test_service_account_token_secrets_do_not_keep_the_namespace(fake: FakeKube) -> None:
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    run_deploy(fake, cfg)
    fake.put(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "default-token-abcde", "namespace": "spectrn"},
        }
    )
    result = teardown(fake, cfg)
    assert "Namespace spectrn" in result.deleted, result.kept
