"""The Anthropic Messages format's vocabulary: content blocks, Claude Code's markers, thinking. Pure.

What several parts of the package read alike: a message's content as blocks; Claude Code's
``<system-reminder>`` blocks and billing line (context that changes between runs, not the user's
words); the thinking blocks the proxy itself made from a chat model's reasoning (marked by
:data:`PROXY_THINKING_SIGNATURE`); whether a tool loop lacks the thinking Anthropic signed; and the
stream's last event (``message_stop``: there is no ``[DONE]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from router.core.sse import is_event_of_type

# The signature of a thinking block the proxy made from a chat model's ``reasoning_content``:
# Anthropic signs its own; this one's ':' occurs in no base64 text, so it is never a real signature.
PROXY_THINKING_SIGNATURE = "pinch-router:reasoning_content"
_PROXY_SIGNATURES = (PROXY_THINKING_SIGNATURE, "")  # "": as versions before the marker wrote it
REMINDER_OPEN = "<system-reminder>"
BILLING_PREFIX = "x-anthropic-billing-header:"


def blocks_of(content: Any) -> list[dict[str, Any]]:
    """A message's content as blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def system_blocks(system: Any) -> list[dict[str, Any]]:
    return blocks_of(system)


def is_billing_line(text: str) -> bool:
    """Claude Code's first system block: its version and entry point, not an instruction."""
    return text.startswith(BILLING_PREFIX)


def is_reminder(text: str) -> bool:
    """A ``<system-reminder>`` block Claude Code adds to user turns: context, not the user's words."""
    return text.lstrip().startswith(REMINDER_OPEN)


def is_proxy_thinking(block: Any) -> bool:
    """A thinking block the proxy made (signed with :data:`PROXY_THINKING_SIGNATURE`, or unsigned)."""
    return isinstance(block, dict) and block.get("type") == "thinking" and block.get("signature") in _PROXY_SIGNATURES


# What ``x-router-dropped`` and the decision row say when thinking is switched off for one request.
THINKING_OFF_MID_TOOL_LOOP = "thinking (tool loop without Anthropic's thinking)"
THINKING_BLOCKS = ("thinking", "redacted_thinking")


def last_assistant_at(messages: Sequence[Any]) -> int | None:
    """The index of the last assistant message (the step the request continues), or None."""
    for at in range(len(messages) - 1, -1, -1):
        message = messages[at]
        if isinstance(message, dict) and message.get("role") == "assistant":
            return at
    return None


def tool_loop_without_thinking(messages: Sequence[Any]) -> bool:
    """Whether Anthropic would refuse this conversation with thinking on: while thinking is on, the
    last assistant message, when it calls tools (the tool loop the request continues), must start
    with a ``thinking`` or ``redacted_thinking`` block Anthropic signed ("Expected `thinking` or
    `redacted_thinking`, but found `tool_use`…"). It does not when that step came from another
    provider mid loop — an OpenAI-chat or Ollama model gives none, and the thinking the proxy made
    from a chat model's reasoning is left out (:func:`without_proxy_thinking`). Only the last
    assistant message counts: a loop that ended with the assistant's text and a new user turn
    needs no thinking from the turns before it."""
    at = last_assistant_at(messages)
    blocks = blocks_of(messages[at].get("content")) if at is not None else []
    if not any(b.get("type") == "tool_use" for b in blocks):
        return False
    first = next((b for b in blocks if not is_proxy_thinking(b)), None)
    return first is None or first.get("type") not in THINKING_BLOCKS


MESSAGE_STOP = frozenset({"message_stop"})


def is_message_stop(data: bytes) -> bool:
    """Whether one SSE data payload is ``message_stop``, the last event of an Anthropic stream (there is no ``[DONE]``)."""
    return is_event_of_type(data, MESSAGE_STOP)
