"""Named starting configurations for target/draft pairs the current Neuron stack runs: each the settings of its
SDK tutorial (image, dialect, release, parallelism, window, Neuron config, timeouts), for `spectrn init --preset`.

Every value is cited in docs/neuron.md ("Presets"); a preset is plain config data, validated like a file.
"""

from __future__ import annotations

from typing import Any

from spectrn.dialects import resolve

_DLC_CURRENT = resolve("vllm-neuron", "current")
assert _DLC_CURRENT is not None  # the registry's current plugin dialect

PRESETS: dict[str, dict[str, Any]] = {
    # aws-neuron-sdk vllm-neuron/docs/tutorials/tutorial-eagle3-speculative-decoding-llama-3-1.md
    "llama-3.1-8b-eagle3": {
        "vllm_dialect": "vllm-neuron",
        "plugin_release": "current",
        "image": _DLC_CURRENT.image,
        "speculation_mode": "eagle",
        "target": "llama-3.1-8b-instruct",
        "draft": "llama-3.1-8b-instruct-eagle3",
        "num_speculative_tokens": 3,
        "tensor_parallel_size": 8,
        "resources": {"neuron_devices": 2},
        "max_num_seqs": 2,
        "max_model_len": 2048,
        "custom_models": {
            "llama-3.1-8b-instruct": {
                "hf_id": "meta-llama/Llama-3.1-8B-Instruct",
                "params_b": 8.0,
                "tokenizer": "llama3",
                "vocab_size": 128256,
                "num_layers": 32,
                "hidden_size": 4096,
                "architecture": "llama",
            },
            "llama-3.1-8b-instruct-eagle3": {
                "hf_id": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
                "params_b": 0.3,
                "tokenizer": "llama3",
                "vocab_size": 128256,
                "num_layers": 1,
                "hidden_size": 4096,
                "architecture": "llama",
                "eagle_draft": True,
            },
        },
    },
    # aws-neuron-sdk vllm-neuron/docs/tutorials/tutorial-eagle3-speculative-decoding-gpt-oss.md (Trn2, BF16)
    "gpt-oss-120b-eagle3": {
        "vllm_dialect": "vllm-neuron",
        "plugin_release": "current",
        "image": _DLC_CURRENT.image,
        "speculation_mode": "eagle",
        "target": "gpt-oss-120b",
        "draft": "gpt-oss-120b-eagle3",
        "num_speculative_tokens": 1,
        "tensor_parallel_size": 16,
        "resources": {"neuron_devices": 4},
        "max_num_seqs": 1,
        "max_model_len": 768,
        "max_num_batched_tokens": 512,
        "dtype": "bfloat16",
        "neuron_config": {
            "quantization": "bf16",
            "num_batched_tokens_buckets": [512],
            "num_seqs_buckets": [1],
            "kv_segment_size_buckets": [512],
            "on_device_sampling_config": {"all_greedy": True},
        },
        "hf_overrides": {"quantization_config": {}},
        "neuron_timeout_s": 1200,
        "custom_models": {
            "gpt-oss-120b": {
                "hf_id": "openai/gpt-oss-120b",
                "params_b": 117.0,
                "tokenizer": "o200k_harmony",
                "vocab_size": 201088,
                "num_layers": 36,
                "hidden_size": 2880,
                "architecture": "gpt-oss",
            },
            "gpt-oss-120b-eagle3": {
                "hf_id": "RedHatAI/gpt-oss-120b-speculator.eagle3",
                "params_b": 0.9,
                "tokenizer": "o200k_harmony",
                "vocab_size": 201088,
                "num_layers": 1,
                "hidden_size": 2880,
                "architecture": "llama",
                "eagle_draft": True,
            },
        },
    },
}
