"""Ollama's answers as the proxy reads them: a chat answer's shape, its token counts. Pure.

Ollama answers ``/api/chat`` (and ``/api/generate``) with one JSON object, or streams the same
objects one a line (NDJSON, :data:`NDJSON`): each with ``done: false`` but the last, whose
``done: true`` comes with ``done_reason`` and the counts (``prompt_eval_count``, ``eval_count``)
and durations in nanoseconds. A chat answer's ``message`` holds the text (``content``), a thinking
model's ``thinking`` and its ``tool_calls`` — each call whole, its ``arguments`` an object; a generate
answer has ``response`` (and ``thinking``) instead. An error is ``{"error": "…"}``, also as a line of
a stream that has started.

:data:`OLLAMA_CHAT` names the wire a provider's native ``/api/chat`` speaks (``api: ollama`` with
``native_chat: true``), translated from chat by :mod:`router.translate.chat_to_ollama`. For the
client wire (:mod:`router.wire.ollama.adapter`): :func:`answer_line` writes an answer or a line of
one; a stream's lines pass the relay as server-sent events (``data: {line}``) and reach the client
as NDJSON (:class:`NdjsonFraming`).
"""

from __future__ import annotations

from typing import Any

import orjson

from router.core.results import Usage
from router.core.sse import data_payloads
from router.wire.usage import token_count, usage_problem

OLLAMA_CHAT = "ollama-chat"
NDJSON = "application/x-ndjson"
COUNTS = ("prompt_eval_count", "eval_count")
# What the proxy does not measure: the model's time, which the provider's answer (a chat completion) does not say.
DURATIONS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")


def answer_problem(answer: Any, line: bool = False) -> str | None:
    """What makes an Ollama chat answer (its JSON) none, or None: a message whose content and
    thinking are text and whose tool calls are a list, and token counts (``prompt_eval_count``,
    ``eval_count``); ``line``: one line of a stream, which may carry no message."""
    if not isinstance(answer, dict):
        return "not a JSON object"
    message = answer.get("message", {} if line else None)
    if not isinstance(message, dict) or not isinstance(message.get("content", ""), str):
        return "no message whose content is text"
    if message.get("thinking") is not None and not isinstance(message["thinking"], str):
        return "its message.thinking is no string"
    if message.get("tool_calls") is not None and not isinstance(message["tool_calls"], list):
        return "its message.tool_calls is no list"
    return usage_problem(answer, COUNTS, "")


def line_problem(line: Any) -> str | None:
    """:func:`answer_problem` of one line of a stream."""
    return answer_problem(line, line=True)


def usage_of(answer: Any) -> Usage | None:
    """The usage an answer (or a stream's last line) reports: ``prompt_eval_count`` and ``eval_count``."""
    if not isinstance(answer, dict):
        return None
    prompt, completion = token_count(answer.get("prompt_eval_count")), token_count(answer.get("eval_count"))
    if prompt is None and completion is None:
        return None
    return Usage(prompt, completion, (prompt or 0) + (completion or 0))


def read_usage(data: bytes) -> Usage | None:
    try:
        return usage_of(orjson.loads(data))
    except orjson.JSONDecodeError:
        return None


def is_last_line(data: bytes) -> bool:
    """Whether one line (an event's payload) is a stream's last: ``done: true`` (parsed only when ``done`` occurs)."""
    if b'"done"' not in data:
        return False
    try:
        line = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(line, dict) and line.get("done") is True


def created_at(epoch: int) -> str:
    """An epoch second as Ollama writes ``created_at`` (RFC 3339, UTC), without a clock or a calendar module."""
    days, second = divmod(epoch, 86400)
    # the proleptic Gregorian date of a day number (Howard Hinnant's civil_from_days)
    shifted = days + 719468
    era, day_of_era = divmod(shifted, 146097)
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    year = year_of_era + era * 400 + (month <= 2)
    return f"{year:04d}-{month:02d}-{day:02d}T{second // 3600:02d}:{second % 3600 // 60:02d}:{second % 60:02d}Z"


def answer_line(
    generate: bool,
    model: str,
    created: str,
    text: str = "",
    thinking: str | None = None,
    calls: list[dict[str, Any]] | None = None,
    done_reason: str | None = None,
    counts: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """One answer or line as Ollama writes it: a chat's ``message`` (``role``, ``content``, ``thinking``,
    ``tool_calls``) or a generate's ``response`` (and ``thinking``); with ``done_reason`` it is the last
    (``done: true``), with the ``counts`` (prompt, output) and the durations, which the proxy does not
    measure (0)."""
    line: dict[str, Any] = {"model": model, "created_at": created}
    if generate:
        line["response"] = text
        if thinking:
            line["thinking"] = thinking
    else:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if thinking:
            message["thinking"] = thinking
        if calls:
            message["tool_calls"] = calls
        line["message"] = message
    line["done"] = done_reason is not None
    if done_reason is not None:
        prompt, output = counts or (0, 0)
        line |= {"done_reason": done_reason, **dict.fromkeys(DURATIONS, 0), "prompt_eval_count": prompt, "eval_count": output}
    return line


class NdjsonFraming:
    """A stream's lines as Ollama sends them (NDJSON): the client's whole events in (each a line's JSON as
    an SSE ``data:`` payload, as the relay and the translations carry them), a line each out."""

    content_type = NDJSON

    def events(self, ready: bytes) -> bytes:
        # a payload of several data lines is one JSON value still: its line breaks are whitespace
        return b"".join(data.replace(b"\n", b" ") + b"\n" for data in data_payloads(ready))

    def close(self) -> bytes:
        return b""
