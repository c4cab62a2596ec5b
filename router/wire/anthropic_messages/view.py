"""Anthropic Messages as the neutral view (:mod:`router.core.request_view`). Pure.

Units: the ``system`` (one unit), then each message — except that a user message's
``tool_result`` blocks are each a unit of their own (the block itself), and its
other blocks (text, reminders, images) one more unit, so a unit holds at most one
tool result. An assistant turn starts at each assistant message. A result's id is
its ``tool_use_id``; its tool is named by the ``tool_use`` with that id. Its content
is the block's ``content`` as sent: a string, or blocks where text is
``{"type": "text", "text"}`` and everything else (images, ``cache_control`` on a
text block) is kept as it is by pinch. Thinking, redacted thinking and ``tool_use``
blocks are never results, so pinch never touches them.

What the stages read besides: the session id from ``metadata.user_id``; the
opening (for the fingerprint) and the turn text (for the classifier and
relevance) without Claude Code's billing line and ``<system-reminder>`` blocks;
tools present (offered, or ``tool_use``/``tool_result`` in the history), images
(also inside tool results), JSON output (``output_config.format``), thinking.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

import orjson

from router.core.content import Message
from router.core.json_body import json_object
from router.core.request_view import PlacedConversation, RequestView, Rewrites, call_arguments, clean_tool_name, nearest_assistant
from router.core.results import StaleSignatures
from router.core.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from router.core.turn_text import TurnText, latest_turn_text
from router.wire.anthropic_messages.blocks import (
    blocks_of,
    is_billing_line,
    is_reminder,
    system_blocks,
    tool_loop_without_thinking,
)
from router.wire.anthropic_messages.thinking import HOLD_FOR_LOOP_THINKING, loop_thinking_at_stake, unbind
from router.wire.anthropic_messages.validation import CheckedMessages, MessagesLayout, MessagesRequest, has_image, layout_of

ANTHROPIC_MESSAGES = "anthropic-messages"


class MessagesConversation(PlacedConversation):
    """:class:`router.core.request_view.Conversation` over an Anthropic ``system`` and ``messages``.

    Its signed reasoning is Anthropic's thinking (:mod:`.thinking`): a batch only the budget calls
    for waits while the tool loop in progress opens with signed thinking, on a model that checks
    it (:meth:`batch_hold`); the thinking blocks after the first rewritten result go stale
    (:meth:`stale_signatures`).
    """

    __slots__ = ("messages", "units", "proxy_thinking", "needs_thinking_off", "_where", "_uses", "_answers")
    result_key = "content"
    result_id_key = "tool_use_id"
    names_from_earlier_units = True  # a result's call is looked up before it only (_tool_use)

    def __init__(
        self, system: Any, messages: list[Message], proxy_thinking: bool = False, needs_thinking_off: bool = False, layout: MessagesLayout | None = None
    ) -> None:
        """``proxy_thinking``: an assistant message holds thinking the proxy made (validation found it).
        ``needs_thinking_off``: the client asked for thinking mid a tool loop that has none Anthropic signed
        (:func:`~router.wire.anthropic_messages.validation.tool_loop_without_thinking`): an Anthropic provider
        gets this request with thinking off. ``layout``: the units as the fused check placed them
        (:class:`~.validation.MessagesLayout`); else placed here."""
        self.messages = messages
        self.proxy_thinking = proxy_thinking
        self.needs_thinking_off = needs_thinking_off
        if layout is None:
            layout = layout_of(system, messages)
        super().__init__(layout.results, layout.turns)
        self.units = layout.units
        self._where = layout.where
        self._uses: dict[Any, list[tuple[int, dict[str, Any]]]] | None = None  # tool_use id → (message, block), in order
        self._answers: dict[int, int] = {}  # message → the nearest assistant message at or before it (nearest_assistant)

    def message_of(self, position: int) -> int:
        """The index in ``messages`` of the message holding tool result ``position``."""
        return self._where[position][0]

    def tool_name(self, unit: int) -> str:
        return clean_tool_name(self._tool_use(unit).get("name"))

    def tool_call(self, unit: int) -> tuple[str, str]:
        use = self._tool_use(unit)
        return clean_tool_name(use.get("name")), call_arguments(use.get("input"))

    def _tool_use(self, unit: int) -> dict[str, Any]:
        """The ``tool_use`` block whose id the result ``units[unit]`` answers ({} when none): the one in
        the nearest assistant message before the result's, else the last with that id before it — never
        one after it (:attr:`names_from_earlier_units`).

        Pinch names a result's tool on every request of a long session (placeholders, first sight's
        earlier calls): the nearest call is a look at one message, where indexing every call of the
        conversation once a request was O(session) (chat's view looks the same way)."""
        tool_use_id = self.units[unit].get("tool_use_id")
        messages, result_units = self.messages, self._units
        position = bisect_left(result_units, unit)
        if position == len(result_units) or result_units[position] != unit:
            return {}
        holder = self._where[position][0]
        m = nearest_assistant(messages, holder - 1, self._answers)
        content = messages[m].get("content") if m >= 0 else None
        if type(content) is list:
            for block in content:
                if type(block) is dict and block.get("id") == tool_use_id and block.get("type") == "tool_use":
                    return block
        if self._uses is None:  # a result its nearest call does not answer: every call indexed, once a request
            uses: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
            for index, message in enumerate(messages):
                if message.get("role") == "assistant":
                    for b in blocks_of(message.get("content")):
                        if b.get("type") == "tool_use":
                            uses.setdefault(b.get("id"), []).append((index, b))
            self._uses = uses
        found = self._uses.get(tool_use_id, ())
        before = bisect_left(found, holder, key=lambda use: use[0])
        return found[before - 1][1] if before else {}

    def batch_hold(self, checks_signatures: bool) -> str | None:
        """A batch would unbind the signed thinking the tool loop in progress opens with (thinking
        would then be off for the rest of the loop): it waits for the loop's end."""
        return HOLD_FOR_LOOP_THINKING if checks_signatures and loop_thinking_at_stake(self.messages) else None

    def stale_signatures(self, first_changed: int | None, remembered: tuple[str, ...]) -> tuple[StaleSignatures | None, tuple[str, ...]]:
        if first_changed is None and not remembered:
            return None, remembered
        found = unbind(self.messages, self.message_of(first_changed) if first_changed is not None else None, remembered)
        return (found if found.positions else None), found.keys

    def messages_with(self, rewrites: Rewrites) -> list[Message]:
        """The client's messages with each rewritten result's ``content`` replaced — nothing else of its
        block (``is_error``, ``cache_control``), no other block or message; the very same list when none is."""
        if not rewrites:
            return self.messages
        out = list(self.messages)
        for position, content in rewrites.items():
            m, b = self._where[position]
            message = out[m]
            if message is self.messages[m]:
                message = out[m] = {**message, "content": list(message["content"])}
            message["content"][b] = {**message["content"][b], "content": content}
        return out


def user_words(content: Any) -> str:
    """The text a user turn really says: its text blocks without ``<system-reminder>`` ones."""
    if isinstance(content, str):  # one text block
        return "" if is_reminder(content) else content
    if not isinstance(content, list):
        return ""
    # read on every request, newest message first, past each tool result's message (no text block)
    words = [t for b in content if type(b) is dict and b.get("type") == "text" and type(t := b.get("text")) is str and not is_reminder(t)]
    return words[0] if len(words) == 1 else "\n".join(words)


def system_text(system: Any) -> str:
    """The system prompt without Claude Code's billing line (it changes with the version, not the task)."""
    return "\n\n".join(t for b in system_blocks(system) if isinstance(t := b.get("text"), str) and not is_billing_line(t))


def opening(system: Any, messages: list[Message]) -> tuple[str, ...]:
    """What the fingerprint hashes: the system text and the first user words, as for chat (role, text)."""
    parts: list[str] = []
    if text := system_text(system):
        parts += ["system", text]
    for message in messages:
        if message.get("role") == "user" and (words := user_words(message.get("content"))):
            parts += ["user", words]
            break
    return tuple(parts)


def turn_text(messages: list[Message], max_chars: int, words: list[int] | None = None) -> TurnText:
    """The last real user words (tool results and reminders are not what was asked) and the last
    assistant turn's tool calls plus the tail of its text (:func:`router.core.turn_text.latest_turn_text`);
    ``words``: the user messages that may hold words, when the check found them."""
    users = (messages[i] for i in reversed(words)) if words is not None else None
    return latest_turn_text(lambda: ((m.get("role"), m) for m in reversed(messages)), _user_words_of, _calls_and_text, max_chars, users)


def _user_words_of(message: Message) -> str:
    return user_words(message.get("content"))


def _calls_and_text(message: Message) -> tuple[list[str], str]:
    content = message.get("content")
    if type(content) is str:  # one text block
        return [], content
    calls: list[str] = []
    texts: list[str] = []
    # one pass over the blocks, as they are (read for each recent step of every request)
    for block in content if type(content) is list else ():
        if type(block) is dict:
            kind = block.get("type")
            if kind == "text":
                texts.append(block.get("text", ""))
            elif kind == "tool_use":
                calls.append(f"{block.get('name', '')}({orjson.dumps(block.get('input', {})).decode()})")
    return calls, "".join(texts)


def messages_view(body: dict[str, Any], parsed: MessagesRequest, turn_chars: int, checked: CheckedMessages | None = None) -> RequestView:
    """The view of a validated Messages body (``parsed`` is :func:`validate_messages_body`'s); ``checked``:
    the fused check's findings (:func:`~router.wire.anthropic_messages.validation.check_messages_body`),
    which spare the view its own passes over the messages."""
    messages = parsed.messages
    offers = any("input_schema" in t or t.get("type") == "custom" for t in parsed.tools or [])
    if checked is None:
        history_tools = any(
            b.get("type") in ("tool_use", "tool_result") for m in messages if isinstance(m.get("content"), list) for b in blocks_of(m["content"])
        )
        has_images = any(has_image(m.get("content")) for m in messages)
        layout = None
    else:
        history_tools, has_images, layout = checked.history_tools, checked.has_images, checked.layout
    thinking = wants_thinking(body)
    needs_thinking_off = thinking and tool_loop_without_thinking(messages)
    return RequestView(
        wire=ANTHROPIC_MESSAGES,
        model=parsed.model,
        stream=parsed.stream,
        conversation=MessagesConversation(body.get("system"), messages, parsed.proxy_thinking, needs_thinking_off, layout),
        tools=parsed.tools,
        offers_tools=offers,
        tools_present=offers or history_tools,
        has_images=has_images,
        json_output=wants_json_output(body),
        output_limit=parsed.max_tokens,
        turn_text=turn_text(messages, turn_chars, checked.facts.words if checked is not None and checked.facts is not None else None),
        opening=opening(body.get("system"), messages),
        usage_requested=True,  # an Anthropic stream always reports its usage
        body_session=metadata_session(body),
        thinking=thinking,
        reused_units=checked.reused_units if checked is not None else 0,
    )


def count_input_tokens(body: dict[str, Any], estimator: TokenEstimator = DEFAULT_ESTIMATOR) -> int:
    """The request's input tokens with the project's one estimator, over the same units pinch and the
    gate count: system, every block of every message (text, images as the configured image tokens,
    thinking with its signature, ``tool_use``, ``tool_result`` with what it holds) and the tool
    schemas. Never 0 for a valid request."""
    units = MessagesConversation(body.get("system"), body.get("messages") or []).units
    return estimator.prompt_tokens(list(units), body.get("tools") or None)


def metadata_session(body: dict[str, Any]) -> str | None:
    """The session part of ``metadata.user_id``: Claude Code sends a JSON string with ``session_id``."""
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str) or not user_id.startswith("{"):
        return None
    parsed = json_object(user_id)
    session = parsed.get("session_id") if parsed is not None else None
    return session.strip() if isinstance(session, str) and session.strip() else None


def wants_json_output(body: dict[str, Any]) -> bool:
    """``output_config.format`` asks for JSON (a schema), which the gate must see as JSON mode."""
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, dict) else None
    return isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object", "json")


def wants_thinking(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
