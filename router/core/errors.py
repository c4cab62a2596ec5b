"""An error the proxy answers with, before any wire format writes it. Pure.

Every refusal (the edge's, a stage's, an upstream's relayed) is one :class:`ApiError`; the
client's wire adapter writes it in its format's own shape (``render_error``: OpenAI's
``{"error": {...}}``, Anthropic's ``{"type": "error", ...}``, Google's ``{"error": {"code", …}}``)
as an :class:`ErrorAnswer` — status, headers and body bytes, no HTTP framework — and the HTTP
edge makes the response of it (:func:`router.contract.context.error_response`).
"""

from __future__ import annotations

from dataclasses import dataclass

from router.core.redaction import clip

JSON = "application/json"


@dataclass(frozen=True, slots=True)
class ApiError:
    """``type`` and ``code``: the error's class and its machine-readable name (OpenAI's vocabulary:
    ``invalid_request_error``, ``upstream_error`` …), which every format maps from; ``code`` is also
    what the decision log records."""

    status: int
    message: str
    type: str
    code: str
    param: str | None = None
    # The request's body was not read to its end, so its connection cannot carry another request.
    close_connection: bool = False


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """An error as a wire format writes it (sans-io): the HTTP edge sends it as a JSON response."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


def invalid_request(message: str, code: str = "invalid_request", param: str | None = None, status: int = 400) -> ApiError:
    return ApiError(status, message, "invalid_request_error", code, param)


def internal_failure(what: str, request_id: str) -> str:
    """What a client is told of a stage that broke: where to look, never the exception (it is in the log)."""
    return f"{what} failed inside the proxy; its log has the details (stage_failed, request id {request_id})"


def describe(exc: BaseException) -> str:
    """An exception as the trace and the log name it: its type, and its message when it has one."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# What a validation message may be at most. The value it names is quoted clipped where it is
# written (router.core.redaction.quoted); this bounds the whole, so no refusal of a body echoes it.
MAX_VALIDATION_MESSAGE_CHARS = 1000


class InvalidRequest(ValueError):
    """A body is not a usable request of its format; ``param`` points at the offending field.

    Every wire's validation raises it (or a subclass), so this is where its message is bounded:
    to :data:`MAX_VALIDATION_MESSAGE_CHARS`, ``param`` to 200.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        message = clip(message, MAX_VALIDATION_MESSAGE_CHARS)
        super().__init__(message)
        self.message = message
        self.param = clip(param, 200) if param is not None else None
