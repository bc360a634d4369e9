"""Non-streaming response bodies: a finished request as vLLM's response models dump it, per profile."""

from __future__ import annotations

from typing import Any

from spectrn.sim.engine import SimRequest
from spectrn.sim.parse import bool_param
from spectrn.sim.profiles import ServerProfile


def final_body(
    req: SimRequest, chat: bool, body: dict[str, Any], *, profile: ServerProfile, model_name: str, fingerprint: str
) -> dict[str, Any]:
    """The body of a finished non-streaming request, field for field as the profile's server writes it."""
    text = "".join(req.text_parts)
    if profile.errors == "v0":
        return final_body_v0(req, chat, text, model_name)
    return_ids = bool_param(body, "return_token_ids") and profile.token_ids
    usage = {
        "prompt_tokens": req.prompt_len,
        "total_tokens": req.prompt_len + req.emitted,
        "completion_tokens": req.emitted,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }
    ids = list(req.token_ids) if return_ids else None
    pids = list(req.prompt_ids) if return_ids else None
    created = req.created
    if chat:
        return {
            "id": req.rid,
            "object": "chat.completion",
            "created": created,
            "model": model_name,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": text,
                        "refusal": None,
                        "annotations": None,
                        "audio": None,
                        "function_call": None,
                        "reasoning": None,
                    },
                    "logprobs": None,
                    "finish_reason": req.finished,
                    "stop_reason": None,
                    "token_ids": ids,
                    "routed_experts": None,
                }
            ],
            "service_tier": None,
            "system_fingerprint": fingerprint,
            "usage": usage,
            "prompt_logprobs": None,
            "prompt_token_ids": pids,
            "prompt_text": None,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "metrics": None,
        }
    return {
        "id": req.rid,
        "object": "text_completion",
        "created": created,
        "model": model_name,
        "choices": [
            {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": req.finished,
                "stop_reason": None,
                "token_ids": ids,
                "prompt_logprobs": None,
                "prompt_token_ids": pids,
                "routed_experts": None,
            }
        ],
        "service_tier": None,
        "system_fingerprint": fingerprint,
        "usage": usage,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
    }


def final_body_v0(req: SimRequest, chat: bool, text: str, model_name: str) -> dict[str, Any]:
    """The fork's non-streaming bodies (vLLM 0.9 response models, dumped in full)."""
    usage = {
        "prompt_tokens": req.prompt_len,
        "total_tokens": req.prompt_len + req.emitted,
        "completion_tokens": req.emitted,
        "prompt_tokens_details": None,
    }
    head = {"id": req.rid, "object": "chat.completion" if chat else "text_completion", "created": req.created}
    if chat:
        message: dict[str, Any] = {
            "role": "assistant",
            "reasoning_content": None,
            "content": text,
            "tool_calls": [],
        }
        choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": req.finished}
        choice["stop_reason"] = None
        return {
            **head,
            "model": model_name,
            "choices": [choice],
            "usage": usage,
            "prompt_logprobs": None,
            "kv_transfer_params": None,
        }
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": req.finished,
        "stop_reason": None,
        "prompt_logprobs": None,
    }
    return {**head, "model": model_name, "choices": [choice], "usage": usage, "kv_transfer_params": None}
