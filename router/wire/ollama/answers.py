"""Ollama's answers as the proxy reads them: a chat answer's shape, its token counts. Pure.

Ollama answers ``/api/chat`` (and ``/api/generate``) with one JSON object, or streams the same
objects one a line (NDJSON, :data:`NDJSON`): each with ``done: false`` but the last, whose
``done: true`` comes with ``done_reason`` and the counts (``prompt_eval_count``, ``eval_count``)
and durations in nanoseconds. A chat answer's ``message`` holds the text (``content``), a thinking
model's ``thinking`` and its ``tool_calls`` — each call whole, its ``arguments`` an object. An error
is ``{"error": "…"}``, also as a line of a stream that has started.

:data:`OLLAMA_CHAT` names the wire a provider's native ``/api/chat`` speaks (``api: ollama`` with
``native_chat: true``), translated from chat by :mod:`router.translate.chat_to_ollama`.
"""

from __future__ import annotations

from typing import Any

from router.wire.usage import usage_problem

OLLAMA_CHAT = "ollama-chat"
NDJSON = "application/x-ndjson"
COUNTS = ("prompt_eval_count", "eval_count")


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
