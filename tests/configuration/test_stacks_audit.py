"""Which stacks get the out-of-support notice and the EAGLE3 recipe warning, and what they say
(``spectrn.configuration.stacks``; the wording of the SDK's facts is quoted from docs/neuron.md)."""

from __future__ import annotations

from spectrn.configuration.stacks import eagle3_without_recipe, run_stack_notice, unsupported_stack

FORK = "UNSUPPORTED STACK: vllm_dialect legacy-neuron is the Neuron fork of vLLM V0 (DLC 0.9.1, SDK 2.26.1), serving "
FUSED = "draft-model speculation (speculation_mode: fused), which runs only on this fork: "


def test_only_the_out_of_support_fork_gets_the_notice() -> None:
    assert unsupported_stack("vllm-neuron", "eagle") is None
    assert unsupported_stack("upstream", "eagle") is None
    fused = unsupported_stack("legacy-neuron", "fused")
    assert fused is not None and fused.startswith(FORK + FUSED + "'Starting with Neuron 2.28 release")
    medusa = unsupported_stack("legacy-neuron", "medusa")
    assert medusa is not None and medusa.startswith(FORK + "speculation_mode: medusa: 'Starting with Neuron 2.28")
    assert medusa.endswith("RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3 (docs/neuron.md)")


def test_a_run_is_judged_by_the_metrics_its_server_showed_before_its_config() -> None:
    assert run_stack_notice("legacy-neuron", "fused", "v1") is None  # a V1 server: not the fork, whatever the config
    v0 = run_stack_notice("vllm-neuron", "eagle", "v0")  # V0 families: the fork, which serves fused speculation
    assert v0 is not None and v0.startswith(FORK + FUSED)
    own = run_stack_notice("legacy-neuron", "medusa", "v0")  # the fork named in the config: its own mode
    assert own is not None and own.startswith(FORK + "speculation_mode: medusa: ")
    assert run_stack_notice("vllm-neuron", "eagle", None) is None
    unknown = run_stack_notice("legacy-neuron", "fused", None)
    assert unknown is not None and unknown.startswith(FORK + FUSED)


def test_eagle3_is_warned_about_only_off_the_recipes() -> None:
    recipes = ("llama", "gpt-oss")
    assert eagle3_without_recipe("llama-3.1-8b", "llama", recipes) is None
    assert eagle3_without_recipe("qwen3-32b", "", recipes) == (
        "target: 'qwen3-32b' (architecture 'undeclared') with eagle3 on the current vllm-neuron plugin: its model "
        "recipes list EAGLE3 for Llama 3 and GPT-OSS only [aws-neuron/aws-neuron-sdk vllm-neuron/docs/model-recipes/ "
        "(llama-3.md, gpt-oss.md)]; the plugin may not compile or accept this pair, so check it on a small run first"
    )
    assert "(architecture 'qwen3')" in (eagle3_without_recipe("qwen3-32b", "qwen3", recipes) or "")
