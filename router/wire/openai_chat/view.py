"""OpenAI chat messages as the neutral view (:mod:`router.core.request_view`). Pure.

A unit is a message; a tool result is a ``tool`` message (its id the
``tool_call_id``, else ``#<index>``); an assistant turn starts at each
assistant message. A result's tool is named by the call whose ``id`` is its
``tool_call_id`` in the assistant message it answers (the nearest one before
it), else by the message's ``name``, else ``tool``. Tool results come from one pass over the
messages, made the first time pinch asks (a request within budget never does), recording the
results' indexes only (:meth:`ChatConversation.result_units`); the protected turns are found by
walking back from the end (:meth:`ChatConversation.last_turns_start`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from router.core.content import Message, content_text
from router.core.fingerprint import opening_parts
from router.core.request_view import TOOL_NAME_MAX_CHARS, Conversation, RequestView, Rewrites, ToolResult, call_arguments, clean_tool_name, nearest_assistant, tool_results_of, units_with
from router.core.turn_text import TurnText, latest_turn_text
from router.core.turns import has_text
from router.wire.openai_chat.body import usage_must_be_injected
from router.wire.openai_chat.validation import ChatFacts, ChatRequest, offers_tools, requested_max_tokens


OPENAI_CHAT = "openai-chat"
JSON_MODE_FORMATS = frozenset({"json_object", "json_schema"})


class ChatConversation(Conversation):
    """:class:`router.core.request_view.Conversation` over a list of chat messages.

    Built for every request, so it holds only the messages until asked. It names its results
    itself (a placeholder asks once per result, so a name costs one call), and
    :func:`router.core.pinch.tool_name_for` is its lookup on its own: each lookup walks back to
    the nearest assistant message, remembering the answer for every message it passes, so
    naming all of a transcript's results costs one pass over it in total, in any order
    (relevance mode asks in relevance order) — never a walk per result.
    """

    __slots__ = ("messages", "_answers", "_units", "_results")
    result_key = "content"
    result_id_key = "tool_call_id"
    names_from_earlier_units = True  # a result's call is in the nearest assistant message before it (_function)

    def __init__(self, messages: list[Message], results: list[int] | None = None) -> None:
        """``results``: the index of each tool message, when the check found them (else found when asked)."""
        self.messages = messages
        # message index -> index of the nearest assistant message at or before it (-1: none)
        self._answers: dict[int, int] | None = None
        self._units: list[int] | None = results  # the index of each tool message
        self._results: list[ToolResult] | None = None

    @property
    def units(self) -> list[Message]:
        return self.messages

    def result_units(self) -> list[int]:
        units = self._units
        if units is None:
            # once per pruned request, over every message: indexes only (pinch reads a
            # candidate's content and id from its message)
            units = self._units = [index for index, message in enumerate(self.messages) if message.get("role") == "tool"]
        return units

    def tool_results(self) -> list[ToolResult]:
        if self._results is None:
            self._results = tool_results_of(self)
        return self._results

    def turn_starts(self) -> list[int]:
        return [index for index, message in enumerate(self.messages) if message.get("role") == "assistant"]

    def last_turns_start(self, count: int) -> int:
        # walks back only to the protected turns, not over the whole transcript
        return protected_from(self.messages, count)

    def tool_name(self, index: int) -> str:
        """The tool that produced the result ``messages[index]`` (a message is a unit; see the module doc)."""
        function = self._function(index)
        name = function.get("name") if function is not None else None
        if type(name) is str and name.isidentifier() and len(name) <= TOOL_NAME_MAX_CHARS:
            return name  # the usual case, clean already: clean_tool_name would return it as it is
        return clean_tool_name(name, self.messages[index].get("name"))

    def tool_call(self, index: int) -> tuple[str, str]:
        function = self._function(index) or {}
        return clean_tool_name(function.get("name"), self.messages[index].get("name")), call_arguments(function.get("arguments"))

    def _function(self, index: int) -> dict[str, Any] | None:
        """The ``function`` of the call the result ``messages[index]`` answers, if there is one."""
        messages = self.messages
        # most results directly follow the call they answer
        answered = messages[index - 1] if index else None
        if answered is None or answered.get("role") != "assistant":
            if self._answers is None:
                self._answers = {}
            assistant = nearest_assistant(messages, index - 1, self._answers)
            answered = messages[assistant] if assistant >= 0 else None
        if answered is not None:
            # the call this result answers: a placeholder asks once per result
            calls, call_id = answered.get("tool_calls"), messages[index].get("tool_call_id")
            if type(calls) is list and type(call_id) is str:
                for call in calls:
                    if type(call) is dict and call.get("id") == call_id:
                        function = call.get("function")
                        return function if type(function) is dict else None
        return None


def chat_view(body: dict[str, Any], parsed: ChatRequest, turn_chars: int, reused: int = 0, facts: ChatFacts | None = None) -> RequestView:
    """The view of a validated chat body (``parsed`` is :func:`router.wire.openai_chat.validation.validate_chat_body`'s);
    ``reused``: its leading messages that are an earlier body's (a unit is a message); ``facts``: what
    the fused check found (the user and tool messages), which spares the view its walks over them."""
    messages = parsed.messages
    offers = offers_tools(body)
    response_format = body.get("response_format")
    return RequestView(
        wire=OPENAI_CHAT,
        model=parsed.model,
        stream=parsed.stream,
        conversation=ChatConversation(messages, facts.results if facts is not None else None),
        tools=body.get("tools") or None,
        offers_tools=offers,
        tools_present=offers or parsed.tool_history,
        has_images=parsed.has_images,
        json_output=isinstance(response_format, dict) and response_format.get("type") in JSON_MODE_FORMATS,
        output_limit=requested_max_tokens(body),
        turn_text=extract_turn_text(messages, turn_chars, facts.users if facts is not None else None),
        opening=opening_parts(messages),
        usage_requested=not usage_must_be_injected(body),
        reused_units=reused,
    )


def messages_with(messages: list[Message], result_units: Sequence[int], rewrites: Rewrites) -> list[Message]:
    """``messages`` with each rewritten result's content replaced (:func:`units_with`)."""
    return units_with(messages, result_units, rewrites, "content")


def extract_turn_text(messages: list[Message], max_chars: int, users: list[int] | None = None) -> TurnText:
    """The turn text of chat messages (:func:`router.core.turn_text.latest_turn_text`); ``users``: the
    index of each user message, when known."""
    newest_users = (messages[i] for i in reversed(users)) if users is not None else None
    return latest_turn_text(lambda: ((m.get("role"), m) for m in reversed(messages)), _words, _calls_and_text, max_chars, newest_users)


def _words(message: Message) -> str:
    return content_text(message.get("content"))


def _calls_and_text(message: Message) -> tuple[list[str], str]:
    return tool_call_arguments(message), content_text(message.get("content"))


# --- turns and candidates of a list of chat messages (the turn text, pinch's protected turns) ---


def tool_call_arguments(message: Message) -> list[str]:
    """The `name(arguments)` strings of an assistant message's tool calls, in order."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            out.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    return out


def protected_from(messages: list[Message], keep_last_turns: int) -> int:
    """Index of the first protected message; 0 when there are too few turns (nothing is a candidate)."""
    seen = 0
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            seen += 1
            if seen == keep_last_turns:
                return index
    return 0


def has_text_content(message: Message) -> bool:
    return has_text(message.get("content"))


def trim_candidates(messages: list[Message], keep_last_turns: int) -> list[int]:
    """Indexes of the old tool results pinch may compress, oldest first."""
    end = protected_from(messages, keep_last_turns)
    return [
        i
        for i in range(end)
        if (message := messages[i]).get("role") == "tool"
        and (type(message.get("content")) is str or has_text_content(message))  # strings first: the usual case
    ]
