"""The fake API server's DRA rule: a container's ``resources.claims`` must name entries of its pod's
``resourceClaims`` (pkg/apis/core/validation/validation.go validateResourceClaimNames; docs/kubernetes.md), and
spectrn's DRA objects (server Deployments, compile Jobs, both DRA API versions) satisfy it on the fake cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from doubles.kube_fake import FakeKube
from doubles.kubehelp import add_slices
from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.deploy.compile import apply_jobs, compile_jobs, prerequisites, wait_jobs
from spectrn.kube.client import KubeApiError
from spectrn.render import manifests as render

NS = "spectrn"


def _cfg(mode: str) -> SpectrnConfig:
    return build_config({"s3": {"bucket": "my-models"}, "resources_mode": mode}, environ={})


def _deployment(claims: list[dict[str, Any]], pod_claims: list[dict[str, Any]] | None) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "server", "image": "x:1", "resources": {"claims": claims}}]}
    if pod_claims is not None:
        pod["resourceClaims"] = pod_claims
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod},
        },
    }


@pytest.fixture
def kube() -> FakeKube:
    f = FakeKube()
    f.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return f


def _refused(kube: FakeKube, obj: dict[str, Any]) -> KubeApiError:
    with pytest.raises(KubeApiError) as caught:
        kube.apply(obj)
    assert caught.value.status == 422
    return caught.value


def test_a_claim_the_pod_does_not_declare_is_refused(kube: FakeKube) -> None:
    err = _refused(kube, _deployment([{"name": "neuron"}], None))
    assert (
        'Deployment.apps "web" is invalid: spec.template.spec.containers[0].resources.claims[0]: '
        'Not found: "neuron": must be one of the names in pod.spec.resourceClaims which is empty'
    ) in str(err)


def test_the_refusal_lists_the_pods_claim_names(kube: FakeKube) -> None:
    pod_claims = [{"name": "devices", "resourceClaimTemplateName": "t"}, {"name": "accel", "resourceClaimName": "c"}]
    err = _refused(kube, _deployment([{"name": "neuron"}], pod_claims))
    assert 'claims[0]: Not found: "neuron": must be one of the names in pod.spec.resourceClaims: accel, devices' in (
        str(err)
    )


def test_a_claim_named_twice_is_refused(kube: FakeKube) -> None:
    err = _refused(kube, _deployment([{"name": "n"}, {"name": "n"}], [{"name": "n", "resourceClaimName": "c"}]))
    assert 'resources.claims[1]: Duplicate value: "n"' in str(err)


def test_matching_names_are_accepted(kube: FakeKube) -> None:
    kube.apply(_deployment([{"name": "n"}], [{"name": "n", "resourceClaimName": "c"}]))
    assert kube.find("Deployment", "web", NS) is not None


@pytest.mark.parametrize("mode", ["dra-v1", "dra-v1beta1"])
def test_spectrns_dra_server_satisfies_the_rule_and_breaking_it_is_caught(kube: FakeKube, mode: str) -> None:
    cfg = _cfg(mode)
    dep = next(o for o in render.render_objects(cfg, components=["speculative"]) if o["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["resourceClaims"] and pod["containers"][0]["resources"]["claims"]  # DRA, not device plugin
    kube.apply(copy.deepcopy(dep))
    broken = copy.deepcopy(dep)
    broken["metadata"]["name"] = "broken"
    del broken["spec"]["template"]["spec"]["resourceClaims"]
    assert "which is empty" in str(_refused(kube, broken))


@pytest.mark.parametrize("mode", ["dra-v1", "dra-v1beta1"])
def test_dra_compile_jobs_run_on_the_fake_cluster(mode: str) -> None:
    cfg = _cfg(mode)
    fake = FakeKube()
    add_slices(fake, version="resource.k8s.io/v1" if mode == "dra-v1" else "resource.k8s.io/v1beta1")
    fake.job_finishes_without_collect = True
    jobs = compile_jobs(cfg, ["qwen3-1.7b"], [7])
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        names = {rc["name"] for rc in pod["resourceClaims"]}
        assert names and {c["name"] for c in pod["containers"][0]["resources"]["claims"]} <= names
    names = apply_jobs(fake, jobs, prerequisites(cfg))
    states = wait_jobs(fake, cfg, names, clock=fake.clock, sleep=fake.sleep, poll_s=1)
    assert set(states.values()) == {"Complete"}
    # the same Job without the pod's claims is what a real API server refuses
    broken = copy.deepcopy(jobs[0])
    broken["metadata"]["name"] = "broken-compile"
    del broken["spec"]["template"]["spec"]["resourceClaims"]
    with pytest.raises(KubeApiError) as caught:
        fake.apply(broken)
    assert caught.value.status == 422 and "must be one of the names in pod.spec.resourceClaims" in str(caught.value)
