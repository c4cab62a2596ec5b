"""Errors in the OpenAI error format: ``{"error": {"message", "type", "code", "param"}}``.

Every error the proxy produces goes through :func:`error_response`, so the
shape and the content type are the same everywhere and no stack trace leaks.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from aiohttp import web

JSON = "application/json"
# Lets the decision log read which error a response carried without parsing it.
ERROR_CODE_KEY = web.ResponseKey("pinch_router_error_code", str)


@dataclass(frozen=True, slots=True)
class ApiError:
    status: int
    message: str
    type: str
    code: str
    param: str | None = None
    # The request's body was not read to its end, so its connection cannot carry another request.
    close_connection: bool = False

    def payload(self) -> dict[str, dict[str, str | None]]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code, "param": self.param}}

    def response(self, headers: dict[str, str] | None = None) -> web.Response:
        response = web.Response(status=self.status, body=orjson.dumps(self.payload()), content_type=JSON, headers=headers)
        response[ERROR_CODE_KEY] = self.code
        if self.close_connection:
            response.force_close()
        return response


def invalid_request(message: str, code: str = "invalid_request", param: str | None = None, status: int = 400) -> ApiError:
    return ApiError(status, message, "invalid_request_error", code, param)


def error_response(
    status: int, message: str, type_: str, code: str, param: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    return ApiError(status, message, type_, code, param).response(headers)


# Status → (type, code) for HTTP errors raised by aiohttp itself (404, 405, ...).
_HTTP_ERRORS = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    415: ("invalid_request_error", "unsupported_media_type"),
}


def from_http_exception(exc: web.HTTPException) -> web.Response:
    type_, code = _HTTP_ERRORS.get(exc.status, ("server_error" if exc.status >= 500 else "invalid_request_error", "http_error"))
    headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
    return error_response(exc.status, exc.reason or "error", type_, code, headers=headers)
