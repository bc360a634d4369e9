"""The simulator's error answers and JSON responses: vLLM's error bodies in each profile's layout."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from spectrn.sim.profiles import ErrorStyle

JSON = "application/json"
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_UNSET: Any = object()


class ApiError(Exception):
    """An error answered with the profile's JSON error body.

    ``v1`` (upstream vLLM, vllm-neuron): ``{"error": {message, type, param, code}}``, and parameter errors
    end with ``(parameter=..., value=...)``. ``v0`` (the Neuron fork, vLLM 0.9): the flat
    ``{"object": "error", message, type, param, code}`` with the plain message.
    """

    TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError", 503: "ServiceUnavailableError"}

    def __init__(self, status: int, message: str, param: str | None = None, value: Any = _UNSET) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.value = value

    def body(self, style: ErrorStyle) -> dict[str, Any]:
        kind = self.TYPES.get(self.status, "Error")
        if style == "v0":
            return {"object": "error", "message": self.message, "type": kind, "param": None, "code": self.status}
        message = self.message
        if self.value is not _UNSET:
            message = f"{message} (parameter={self.param}, value={self.value})"
        return {"error": {"message": message, "type": kind, "param": self.param, "code": self.status}}

    def response(self, style: ErrorStyle) -> web.Response:
        return json_response(self.body(style), status=self.status)


def bad_param(param: str, value: Any, message: str) -> ApiError:
    return ApiError(400, message, param, value)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=dumps(body).encode(), status=status, headers={"Content-Type": JSON, **(headers or {})})
