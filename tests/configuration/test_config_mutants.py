"""What ``SpectrnConfig`` shows a user, pinned whole: the Neuron rules' refusals (field, origin, fact, fix), the
artifact key every compiled folder is named by (its label and the digest of what it hashes, written out by hand),
the S3 prefix refusal, the warnings a config and a cluster deploy print, and the image refusal's fix."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

import spectrn.dialects as dialects
from doubles.render_support import SUPPORTED
from spectrn.configuration.config import RECORDED, SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.errors import ConfigError

LEGACY_IMAGE = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04"


def cfg(overrides: dict[str, Any] | None = None, data: dict[str, Any] | None = None) -> SpectrnConfig:
    return build_config(data or {}, overrides or {}, environ={})


def refused(
    overrides: dict[str, Any], sources: dict[str, str] | None = None, data: dict[str, Any] | None = None
) -> tuple[str, str | None]:
    with pytest.raises(ConfigError) as e:
        build_config(data or {}, overrides, environ={}, sources=sources)
    return e.value.message, e.value.hint


def digest(canonical_json: str) -> str:
    """The first 12 hex digits of the SHA-256 of the key's parts, written as sorted JSON by the test."""
    return hashlib.sha256(canonical_json.encode()).hexdigest()[:12]


# ---- _neuron_rules -------------------------------------------------------------------------------------------


@pytest.fixture
def other_server_release() -> Iterator[None]:
    """A registered server with a release of its own ('9'): plugin_release accepts '9', vllm-neuron has no '9'."""
    other = replace(
        dialects.DIALECTS["legacy-neuron"], key="other-server-9", vllm_dialect="other-server", releases=("9",)
    )
    dialects.register(other)
    try:
        yield
    finally:
        dialects.unregister(other.key)


def test_a_release_the_chosen_dialect_lacks_names_both_fields_their_origins_and_the_dialects_releases(
    other_server_release: None,
) -> None:
    message, hint = refused(
        {"vllm_dialect": "vllm-neuron", "plugin_release": "9", "speculation_mode": "eagle"},
        sources={"plugin_release": "flag --plugin-release", "vllm_dialect": "flag --dialect"},
    )
    assert message == (
        "--plugin-release: '9' is not a release of vllm_dialect 'vllm-neuron' (releases: current, 0.2, 0.5) "
        "(config key plugin_release) (plugin_release from flag --plugin-release; vllm_dialect from flag --dialect)"
    )
    assert hint == "set plugin_release to one of current, 0.2, 0.5"


def test_a_driver_selector_is_refused_without_a_dra_claim_naming_both_fields() -> None:
    message, hint = refused({"neuron_driver": {"versions": ["2.30.2.0"]}, "resources_mode": "device-plugin"})
    assert message == (
        "neuron_driver: a driver-version selector needs a DRA claim; resources_mode device-plugin has none "
        "(neuron_driver from --set neuron_driver; resources_mode from --set resources_mode)"
    )
    assert hint == "set resources_mode: dra-v1 (or dra-v1beta1), or remove neuron_driver"


def test_a_driver_selector_set_by_its_sub_key_is_credited_to_that_setting() -> None:
    # `--set neuron_driver.versions=...` sets only the sub-key: the refusal names it as where neuron_driver came from
    message, _ = refused({"neuron_driver.versions": ["2.30.2.0"], "resources_mode": "device-plugin"})
    assert message == (
        "neuron_driver: a driver-version selector needs a DRA claim; resources_mode device-plugin has none "
        "(neuron_driver from --set neuron_driver.versions; resources_mode from --set resources_mode)"
    )


@pytest.mark.parametrize("mode", ["dra-v1", "dra-v1beta1"])
def test_a_driver_selector_is_accepted_with_a_dra_claim(mode: str) -> None:
    c = cfg({"neuron_driver": {"versions": ["2.30.2.0"]}, "resources_mode": mode})
    assert (c.resources_mode, c.neuron_driver.versions) == (mode, ["2.30.2.0"])


def test_device_plugin_without_a_driver_selector_is_accepted() -> None:
    assert cfg({"resources_mode": "device-plugin"}).resources_mode == "device-plugin"


def test_a_timeout_on_a_server_without_timeout_variables_is_refused_with_its_source() -> None:
    message, hint = refused({"neuron_timeout_s": 1200, "vllm_dialect": "legacy-neuron", "plugin_release": "0.2"})
    assert message == (
        "neuron_timeout_s: vllm_dialect 'legacy-neuron' has no documented compile/execute timeout variables (the "
        "SDK documents VLLM_NEURON_COMPILATION_TIMEOUT and VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS for the current "
        "vllm-neuron plugin [aws-neuron/aws-neuron-sdk vllm-neuron/docs/getting-started/"
        "quickstart-online-serving.md]) (neuron_timeout_s from --set neuron_timeout_s; vllm_dialect from --set "
        "vllm_dialect; plugin_release from --set plugin_release)"
    )
    assert hint == "remove neuron_timeout_s, or use vllm_dialect: vllm-neuron with plugin_release: current"


def test_a_timeout_on_the_current_plugin_is_accepted() -> None:
    c = cfg({"neuron_timeout_s": 1200}, data=SUPPORTED["vllm-neuron-eagle3"])
    assert (c.vllm_dialect, c.plugin_release, c.neuron_timeout_s) == ("vllm-neuron", "current", 1200)


# ---- artifact_key --------------------------------------------------------------------------------------------


def test_the_default_artifact_keys_hash_the_compiled_shape_in_sorted_json() -> None:
    c = cfg()
    base = (
        '{"batch": 4, "dialect": "legacy-neuron", "image": "' + LEGACY_IMAGE + '", "lnc": 2, "seq": 1024, '
        '"target": "Qwen/Qwen3-32B", "tp": 32}'
    )
    spec = (
        '{"batch": 4, "dialect": "legacy-neuron", "draft": "Qwen/Qwen3-1.7B", "image": "' + LEGACY_IMAGE + '", '
        '"lnc": 2, "mode": "fused", "seq": 1024, "target": "Qwen/Qwen3-32B", "tp": 32, "window": 7}'
    )
    assert c.artifact_key(False) == f"qwen3-32b-base-tp32-s1024-b4-{digest(base)}"
    assert c.artifact_key(True) == f"qwen3-32b-sd-qwen3-1p7b-k7-tp32-s1024-b4-{digest(spec)}"
    # an empty neuron_config compiles nothing different: the key keeps its name
    assert cfg({"neuron_config": {}}).artifact_key(True) == c.artifact_key(True)


def test_every_compile_setting_that_is_set_enters_the_artifact_key() -> None:
    c = cfg(
        {
            "neuron_config": {"sequence_parallel_enabled": True},
            "hf_overrides": {},
            "max_num_batched_tokens": 512,
            "dtype": "bfloat16",
            "max_num_seqs": 8,
            "max_model_len": 2048,
            "num_speculative_tokens": 5,
        }
    )
    spec = (
        '{"batch": 8, "dialect": "legacy-neuron", "draft": "Qwen/Qwen3-1.7B", "dtype": "bfloat16", '
        '"hf_overrides": {}, "image": "' + LEGACY_IMAGE + '", "lnc": 2, "max_num_batched_tokens": 512, '
        '"mode": "fused", "neuron_config": {"sequence_parallel_enabled": true}, "seq": 2048, '
        '"target": "Qwen/Qwen3-32B", "tp": 32, "window": 5}'
    )
    assert c.artifact_key(True) == f"qwen3-32b-sd-qwen3-1p7b-k5-tp32-s2048-b8-{digest(spec)}"


def test_a_dotted_target_key_becomes_p_in_the_artifact_label() -> None:
    model = {"hf_id": "example/Big-2.5", "params_b": 70.0, "tokenizer": "qwen3", "vocab_size": 151936}
    c = cfg({"target": "big-2.5"}, data={"custom_models": {"big-2.5": model}})
    spec = (
        '{"batch": 4, "dialect": "legacy-neuron", "draft": "Qwen/Qwen3-1.7B", "image": "' + LEGACY_IMAGE + '", '
        '"lnc": 2, "mode": "fused", "seq": 1024, "target": "example/Big-2.5", "tp": 32, "window": 7}'
    )
    assert c.artifact_key(True) == f"big-2p5-sd-qwen3-1p7b-k7-tp32-s1024-b4-{digest(spec)}"


def test_a_recorded_medusa_config_is_keyed_by_its_heads_not_a_draft() -> None:
    recorded = SpectrnConfig.model_validate({"speculation_mode": "medusa"}, context={RECORDED: True})
    spec = (
        '{"batch": 4, "dialect": "legacy-neuron", "image": "' + LEGACY_IMAGE + '", "lnc": 2, "mode": "medusa", '
        '"seq": 1024, "target": "Qwen/Qwen3-32B", "tp": 32, "window": 7}'
    )
    assert recorded.artifact_key(True) == f"qwen3-32b-sd-medusa-k7-tp32-s1024-b4-{digest(spec)}"


def test_model_names_the_missing_key() -> None:
    with pytest.raises(KeyError) as e:
        cfg().model("no-such-model")
    assert e.value.args == ("no-such-model",)


# ---- _s3_prefixes --------------------------------------------------------------------------------------------


def test_prefixes_lose_only_their_slashes_before_the_checks() -> None:
    c = cfg({"s3.models_prefix": "X", "s3.artifacts_prefix": "Xcompiled"})
    assert (c.s3.models_prefix, c.s3.artifacts_prefix) == ("X", "Xcompiled")
    assert cfg({"s3.models_prefix": "Xmodels", "s3.artifacts_prefix": "X"}).s3.artifacts_prefix == "X"


def test_nested_prefixes_are_refused_with_the_whole_reason_and_both_origins() -> None:
    assert refused({"s3.models_prefix": "/a/b/", "s3.artifacts_prefix": "a"}) == (
        "s3.artifacts_prefix: 'a' overlaps s3.models_prefix 'a/b': the pods may write under artifacts_prefix, which "
        "would then include the model weights (s3.artifacts_prefix from --set s3.artifacts_prefix; s3.models_prefix "
        "from --set s3.models_prefix)",
        "use two separate folders, e.g. models and compiled",
    )


# ---- warnings, cluster_warnings, check_cluster_images, origins -----------------------------------------------

UNSUPPORTED_FUSED = (
    "UNSUPPORTED STACK: vllm_dialect legacy-neuron is the Neuron fork of vLLM V0 (DLC 0.9.1, SDK 2.26.1), serving "
    "draft-model speculation (speculation_mode: fused), which runs only on this fork: 'Starting with Neuron 2.28 "
    "release, vLLM V0 will no longer be supported. This includes the vLLM V0 Neuron forks' [aws-neuron/aws-neuron-sdk "
    "about-neuron/announcements/neuron2.x/announce-no-support-vllm-v0.rst], and speculative decoding with a draft "
    "model is 'only supported on the legacy Neuron fork of vLLM v0 architecture that is no longer supported' "
    "[aws-neuron/aws-neuron-sdk libraries/nxd-inference/developer_guides/vllm-user-guide-v1.rst]; results describe "
    "a stack that gets no fixes; the supported stack is vllm_dialect: vllm-neuron (vLLM V1 with the vllm-neuron "
    "plugin) with speculation_mode: eagle and an EAGLE3 draft, e.g. the SDK tutorial's "
    "meta-llama/Llama-3.1-8B-Instruct with RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3 (docs/neuron.md)"
)


def test_the_legacy_fork_warns_that_fused_speculation_is_an_unsupported_stack() -> None:
    assert cfg().warnings() == [UNSUPPORTED_FUSED]


def test_the_unsupported_stack_notice_names_eagle_on_the_legacy_fork() -> None:
    (notice,) = cfg(data=SUPPORTED["legacy-neuron-eagle"]).warnings()
    assert notice.startswith(
        "UNSUPPORTED STACK: vllm_dialect legacy-neuron is the Neuron fork of vLLM V0 (DLC 0.9.1, SDK 2.26.1), "
        "serving speculation_mode: eagle: 'Starting with Neuron 2.28 release"
    )


def test_an_out_of_support_plugin_release_is_found_by_its_release() -> None:
    old = replace(dialects.DIALECTS["vllm-neuron-0.2"], key="vllm-neuron-0.1", releases=("0.1",), out_of_support=True)
    dialects.register(old)
    try:
        notices = cfg({"plugin_release": "0.1"}, data=SUPPORTED["vllm-neuron-0.2-eagle"]).warnings()
    finally:
        dialects.unregister(old.key)
    assert [n.split(":")[0] for n in notices] == ["UNSUPPORTED STACK"]


def test_server_default_scheduling_on_the_current_plugin_warns_that_the_ab_is_not_like_for_like() -> None:
    c = cfg({"scheduling": "server-default"}, data=SUPPORTED["vllm-neuron-eagle3"])
    assert c.warnings() == [
        "scheduling: server-default on vllm_dialect 'vllm-neuron' (plugin_release current): the baseline runs async "
        "scheduling and the speculative service sync (vllm-neuron features-guide.md: async scheduling is on by "
        "default, and --speculative-config turns it off), so the A/B compares "
        "scheduling modes as well as speculation; set scheduling: same to pin both to --no-async-scheduling"
    ]
    assert cfg(data=SUPPORTED["vllm-neuron-eagle3"]).warnings() == []


def test_cluster_warnings_for_the_placeholder_bucket_and_dra_on_auto_mode_and_karpenter() -> None:
    assert cfg({"node_provisioning": "auto-mode"}).cluster_warnings() == [
        "s3.bucket: still the placeholder; set it to your model bucket before deploying",
        "resources_mode: dra-v1 with node_provisioning auto-mode: 'DRA is not currently supported with EKS Auto "
        "Mode' (EKS User Guide, Manage hardware devices); use resources_mode: device-plugin on Auto Mode nodes",
    ]
    assert cfg({"node_provisioning": "karpenter", "s3.bucket": "my-bucket"}).cluster_warnings() == [
        "resources_mode: dra-v1 with node_provisioning karpenter: Karpenter supports DRA from version 1.15, and "
        "dynamic provisioning needs its feature gates (EKS User Guide, Manage hardware devices); check your "
        "Karpenter version or use resources_mode: device-plugin"
    ]


def test_a_registry_less_image_on_neuron_is_refused_with_how_to_push_it() -> None:
    with pytest.raises(ConfigError) as e:
        cfg({"spectrn_image": "spectrn:0.2"}).check_cluster_images(load_job=True)
    assert (e.value.message, e.value.hint) == (
        "spectrn_image: 'spectrn:0.2' (from --set spectrn_image) names no registry, so a cluster's nodes cannot "
        "pull it",
        "build and push spectrn's image (`make image IMAGE=<account>.dkr.ecr.<region>.amazonaws.com/spectrn:<tag>`, "
        "then `docker push`; docs/kubernetes.md) and set spectrn_image to it, or set spectrn_image_preloaded: true "
        "when every node already holds it",
    )


def test_origins_name_the_source_of_a_set_value_and_the_default() -> None:
    c = cfg({"namespace": "bench"})
    assert c.source_of("namespace") == "from --set namespace"
    assert c.origin_of("namespace") == "--set namespace"
    assert c.origin_of("port") == "the default value"
    assert SpectrnConfig().source_of("port") == "the default"
