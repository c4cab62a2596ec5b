"""An Ollama request as the neutral view (:mod:`router.core.request_view`). Pure.

A unit is a message — of ``/api/chat``'s, or the system and the prompt a ``/api/generate`` request
makes. A message with ``images`` (base64 strings, which the estimator would count as text) is
counted as its text and one image part per image. A tool result is a ``tool`` message: its id its
``tool_call_id`` when the client sent one (Ollama 0.12.10 and later give calls ids; the ``ollama``
Python client sends none back), else ``#<index>``; its tool the call it answers — by that id in the
nearest assistant message before it, else the n-th call of its ``tool_name`` there for the n-th
result of that name — else its ``tool_name``; the call's arguments as compact JSON with sorted keys
(:func:`~router.core.request_view.call_arguments`). An assistant turn starts at each assistant message.

What the stages read besides: the tools offered and in the history, images, JSON output
(``format``: ``"json"`` or a schema), the output limit (``options.num_predict``), thinking
(``think``), the opening and the turn text; a stream always reports its usage (the last line's counts).
"""

from __future__ import annotations

from typing import Any

from router.core.content import Message, content_text
from router.core.fingerprint import opening_parts
from router.core.request_view import (
    PlacedConversation,
    RequestView,
    Rewrites,
    ToolResult,
    call_arguments,
    clean_tool_name,
    nearest_assistant,
    stable_id,
)
from router.core.turn_text import TurnText, latest_turn_text
from router.wire.ollama.validation import GENERATE, OllamaRequest

OLLAMA = "ollama"


def counted(message: Message) -> Message:
    """A message with images as the estimator counts it: its text, then an image part per image."""
    parts = [{"type": "text", "text": message.get("content") or ""}, *({"type": "image_url"} for _ in message["images"])]
    return {**{k: v for k, v in message.items() if k != "images"}, "content": parts}


class OllamaConversation(PlacedConversation):
    """:class:`router.core.request_view.Conversation` over Ollama messages (see the module doc)."""

    __slots__ = ("messages", "units", "generate", "_answers", "_ordinals")
    result_key = "content"
    result_id_key = "tool_call_id"
    names_from_earlier_units = True  # a result's call is in the nearest assistant message before it (_function)

    def __init__(self, messages: list[Message], generate: bool = False) -> None:
        """``generate``: the messages are a ``/api/generate`` request's (its answer is a ``response``)."""
        self.messages = messages
        self.generate = generate
        self._answers: dict[int, int] = {}  # message → the nearest assistant message at or before it (nearest_assistant)
        self._ordinals: dict[int, int] | None = None  # tool message → its count among its name's since the assistant (_ordinal)
        self.units = [counted(m) if m.get("images") else m for m in messages]
        results = [ToolResult(i, stable_id(m.get("tool_call_id"), i), self.units[i].get("content")) for i, m in enumerate(messages) if m.get("role") == "tool"]
        super().__init__(results, [i for i, m in enumerate(messages) if m.get("role") == "assistant"])

    def tool_name(self, unit: int) -> str:
        return clean_tool_name(self._function(unit).get("name"), self.messages[unit].get("tool_name"))

    def tool_call(self, unit: int) -> tuple[str, str]:
        return self.tool_name(unit), call_arguments(self._function(unit).get("arguments"))

    def _function(self, unit: int) -> dict[str, Any]:
        """The ``function`` of the call the result ``messages[unit]`` answers (see the module doc); {} when none is found."""
        messages = self.messages
        result = messages[unit]
        name, call_id = result.get("tool_name"), result.get("tool_call_id")
        assistant = nearest_assistant(messages, unit - 1, self._answers)
        calls = [c["function"] for c in messages[assistant].get("tool_calls") or []] if assistant >= 0 else []
        ids = [c.get("id") for c in messages[assistant].get("tool_calls") or []] if assistant >= 0 else []
        if call_id and call_id in ids:
            return calls[ids.index(call_id)]
        same = [function for function in calls if function.get("name") == name] if name else []
        if not same:
            return {}
        if type(name) is str:
            nth = self._ordinal(unit)
        else:
            nth = sum(1 for m in messages[assistant + 1 : unit] if m.get("role") == "tool" and m.get("tool_name") == name)
        return same[nth] if nth < len(same) else {}

    def _ordinal(self, unit: int) -> int:
        """How many tool messages named as ``messages[unit]`` come between it and the nearest assistant
        message before it: every tool message's count made in one pass, when first asked (a count per
        result, walking back, was quadratic in a body of thousands of results)."""
        ordinals = self._ordinals
        if ordinals is None:
            ordinals = self._ordinals = {}
            seen: dict[str, int] = {}
            for index, message in enumerate(self.messages):
                role = message.get("role")
                if role == "assistant":
                    seen = {}
                elif role == "tool" and type(tool_name := message.get("tool_name")) is str:
                    ordinals[index] = seen.get(tool_name, 0)
                    seen[tool_name] = ordinals[index] + 1
        return ordinals[unit]

    def messages_with(self, rewrites: Rewrites) -> list[Message]:
        """The messages with each rewritten result's content replaced; the very same list when none is.

        A result counted with its images (a list of parts) comes back as its text, its images kept
        only while the rewrite keeps an image part (a text rewrite has none)."""
        if not rewrites:
            return self.messages
        out = list(self.messages)
        units = self.result_units()
        for position, content in rewrites.items():
            index = units[position]
            message = {**out[index], "content": content if isinstance(content, str) else content_text(content)}
            if not (isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "image_url" for p in content)):
                message.pop("images", None)
            out[index] = message
        return out


def _words(message: Message) -> str:
    return content_text(message.get("content"))


def _calls_and_text(message: Message) -> tuple[list[str], str]:
    calls = [
        f"{call['function'].get('name', '')}({call_arguments(call['function'].get('arguments') or {})})"
        for call in message.get("tool_calls") or []
        if isinstance(call, dict) and isinstance(call.get("function"), dict)
    ]
    return calls, content_text(message.get("content"))


def turn_text(messages: list[Message], max_chars: int) -> TurnText:
    """The last user words and the last assistant turn's calls and text (:func:`router.core.turn_text.latest_turn_text`)."""
    return latest_turn_text(lambda: ((m.get("role"), m) for m in reversed(messages)), _words, _calls_and_text, max_chars)


def offers_tools(tools: Any) -> bool:
    return isinstance(tools, list) and any(isinstance(t, dict) and isinstance(t.get("function"), dict) for t in tools)


def ollama_view(parsed: OllamaRequest, turn_chars: int) -> RequestView:
    """The view of a validated Ollama body (``parsed``: :func:`~router.wire.ollama.validation.validate_ollama_body`'s)."""
    messages = parsed.messages
    offers = offers_tools(parsed.tools)
    return RequestView(
        wire=OLLAMA,
        model=parsed.model,
        stream=parsed.stream,
        conversation=OllamaConversation(messages, parsed.action == GENERATE),
        tools=parsed.tools,
        offers_tools=offers,
        tools_present=offers or parsed.tool_history,
        has_images=parsed.has_images,
        json_output=parsed.json_output,
        output_limit=parsed.output_limit,
        turn_text=turn_text(messages, turn_chars),
        opening=opening_parts(messages),
        usage_requested=True,  # the last line always reports the counts
        thinking=parsed.thinking,
    )
