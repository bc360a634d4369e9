"""Whether AWS Neuron still supports the serving stack a config names, and the notices that say so.

Each fact is quoted with its source in docs/neuron.md ("Where each stack stands"); the notices travel in
``SpectrnConfig.warnings()`` (terminal), and as the ``unsupported_stack`` finding (summary.json, summary.md,
the HTML report).
"""

from __future__ import annotations

from spectrn.dialects import DIALECTS, resolve

# Sources, named as docs/neuron.md cites them.
NO_V0_SOURCE = "aws-neuron/aws-neuron-sdk about-neuron/announcements/neuron2.x/announce-no-support-vllm-v0.rst"
V1_GUIDE_SOURCE = "aws-neuron/aws-neuron-sdk libraries/nxd-inference/developer_guides/vllm-user-guide-v1.rst"
RECIPES_SOURCE = "aws-neuron/aws-neuron-sdk vllm-neuron/docs/model-recipes/ (llama-3.md, gpt-oss.md)"

SUPPORTED_ALTERNATIVE = (
    "the supported stack is vllm_dialect: vllm-neuron (vLLM V1 with the vllm-neuron plugin) with "
    "speculation_mode: eagle and an EAGLE3 draft, e.g. the SDK tutorial's meta-llama/Llama-3.1-8B-Instruct with "
    "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3 (docs/neuron.md)"
)


def unsupported_stack(dialect: str, speculation_mode: str, plugin_release: str | None = None) -> str | None:
    """The notice for a stack Neuron no longer supports (None when it is supported)."""
    found = resolve(dialect, plugin_release)
    if found is None or not found.out_of_support:
        return None
    what = (
        "draft-model speculation (speculation_mode: fused), which runs only on this fork"
        if speculation_mode == "fused"
        else f"speculation_mode: {speculation_mode}"
    )
    return (
        f"UNSUPPORTED STACK: vllm_dialect legacy-neuron is the Neuron fork of vLLM V0 (DLC 0.9.1, SDK 2.26.1), "
        f"serving {what}: 'Starting with Neuron 2.28 release, vLLM V0 will no longer be supported. This includes "
        f"the vLLM V0 Neuron forks' [{NO_V0_SOURCE}], and speculative decoding with a draft model is 'only "
        f"supported on the legacy Neuron fork of vLLM v0 architecture that is no longer supported' "
        f"[{V1_GUIDE_SOURCE}]; results describe a stack that gets no fixes; {SUPPORTED_ALTERNATIVE}"
    )


def eagle3_without_recipe(target: str, architecture: str, recipes: tuple[str, ...]) -> str | None:
    """The warning for EAGLE3 on a target family no vllm-neuron model recipe lists with EAGLE3 (``recipes``: the
    families the dialect's recipes list)."""
    if architecture in recipes:
        return None
    return (
        f"target: {target!r} (architecture {architecture or 'undeclared'!r}) with eagle3 on the current "
        f"vllm-neuron plugin: its model recipes list EAGLE3 for Llama 3 and GPT-OSS only [{RECIPES_SOURCE}]; "
        "the plugin may not compile or accept this pair, so check it on a small run first"
    )


def run_stack_notice(dialect: str, speculation_mode: str, metrics_style: str | None) -> str | None:
    """The notice for a run, from what the server showed when it said (``metrics_style``: v0 is the fork's
    vLLM V0 families, v1 vLLM V1's) and else from the recorded config's dialect: a server spectrn did not start
    may run another stack than the config names."""
    if metrics_style == "v1":
        return None
    if metrics_style == "v0":  # the V0 families: the fork's server, whatever the config said
        fork = next(d for d in DIALECTS.values() if d.profile.metrics == "v0")
        mode = speculation_mode if dialect == fork.vllm_dialect else "fused"
        return unsupported_stack(fork.vllm_dialect, mode)
    return unsupported_stack(dialect, speculation_mode)
