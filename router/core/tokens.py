"""The one token estimator for the whole project (ARCHITECTURE §5).

Text counts ceil(chars / 4) per message plus a fixed per-message overhead;
tool-call names and arguments, text parts, tool results and every other string
a message carries (``reasoning_content``, ``name``, unknown keys) count; each
image part counts a fixed amount. It errs on the side of over-counting:
undercounting is what misroutes long contexts (WHAT-USERS-HIT #4).

A message is measured once, as one number: its *weighted characters*, where
each image counts as ``image_tokens × 4`` characters. Because that is a
multiple of 4, ``ceil(weighted / 4)`` equals ceil(text chars / 4) plus the
image tokens exactly, and a rewrite of a message's text is re-counted from its
length change alone (what pinch does for every result it compresses).

Speed matters here: the estimate runs on every request over every message, so
the per-message loop is written flat (no call per message, strings first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from router.core.content import IMAGE_PART_TYPES, TEXT_PART_TYPES, Message

CHARS_PER_TOKEN = 4
TOOL_CALL_OVERHEAD_CHARS = 12  # id, type and framing of one call


class PromptSize(NamedTuple):
    """One measurement of a prompt: each message's weighted characters, and the prompt's tokens."""

    sizes: list[int]
    tokens: int  # every message plus the tool schemas: what prompt_tokens returns
    tools_tokens: int = 0  # the tool schemas' part of them
    tools_chars: int = 0  # the characters of the tool schemas' JSON (:func:`tools_chars`), which they count


@dataclass(frozen=True, slots=True)
class TokenEstimator:
    image_tokens: int = 1000
    per_message_overhead: int = 4

    def message_tokens(self, message: Message) -> int:
        return self.chars_tokens(self.message_sizes([message])[0])

    def chars_tokens(self, weighted_chars: int) -> int:
        """Tokens of one message that measures ``weighted_chars`` (see :meth:`message_sizes`)."""
        return -(-weighted_chars // CHARS_PER_TOKEN) + self.per_message_overhead

    def message_sizes(self, messages: list[Message]) -> list[int]:
        """Each message's weighted characters: its counted text plus ``image_tokens × 4`` per image."""
        image_chars = self.image_tokens * CHARS_PER_TOKEN
        sizes = []
        append = sizes.append
        for message in messages:
            chars = 0
            for key, value in message.items():
                # plain strings (role, text content, ids, names) and nulls first: same counts, less work
                if type(value) is str:
                    chars += len(value)
                elif value is None:
                    pass
                elif key == "tool_calls":
                    chars += _tool_calls_chars(value)
                elif key == "content":
                    chars += _content_chars(value, image_chars)
                else:
                    chars += _value_chars(value)
            append(chars)
        return sizes

    def sizes_tokens(self, sizes: list[int]) -> int:
        """Tokens of messages measured by :meth:`message_sizes` (without tool schemas)."""
        return -sum([c // -CHARS_PER_TOKEN for c in sizes]) + self.per_message_overhead * len(sizes)

    def measure(self, messages: list[Message], tools: Any = None, known: list[int] | None = None, known_tools_chars: int | None = None) -> PromptSize:
        """The prompt's tokens, keeping each message's size so a rewrite can be re-counted cheaply.
        ``known``: the sizes of the first ``len(known)`` messages, measured already (by this estimator);
        ``known_tools_chars``: :func:`tools_chars` of ``tools``, counted already."""
        sizes = known + self.message_sizes(messages[len(known) :]) if known else self.message_sizes(messages)
        chars = tools_chars(tools) if known_tools_chars is None else known_tools_chars
        tools_part = tokens_of_chars(chars)
        return PromptSize(sizes, self.sizes_tokens(sizes) + tools_part, tools_part, chars)

    def prompt_tokens(self, messages: list[Message], tools: Any = None) -> int:
        """Tokens of a whole prompt: every message plus the tool schemas sent with it."""
        return self.measure(messages, tools).tokens


DEFAULT_ESTIMATOR = TokenEstimator()


def estimate_prompt_tokens(messages: list[Message], tools: Any = None, estimator: TokenEstimator = DEFAULT_ESTIMATOR) -> int:
    return estimator.prompt_tokens(messages, tools)


def tools_tokens(tools: Any) -> int:
    """Tokens of the request's tool schemas: ceil(chars of their JSON / 4); none ⇒ 0."""
    return tokens_of_chars(tools_chars(tools))


def tools_chars(tools: Any) -> int:
    """The characters of the request's tool schemas' JSON, as :func:`tools_tokens` counts them; none ⇒ 0."""
    return len(orjson.dumps(tools)) if tools else 0


def tokens_of_chars(chars: int) -> int:
    """Tokens of ``chars`` characters of JSON or text without per-message overhead: ceil(chars / 4)."""
    return -(chars // -CHARS_PER_TOKEN)


def _value_chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if value is None or isinstance(value, (bool, int, float)):
        return 0
    return len(orjson.dumps(value, default=str))


def _content_chars(content: Any, image_chars: int) -> int:
    """Weighted characters of a message's content (a string is handled by the caller)."""
    if not isinstance(content, list):
        return _value_chars(content)
    chars = 0
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            chars += len(part["text"])
        elif kind in IMAGE_PART_TYPES:
            chars += image_chars
        else:
            chars += _value_chars(part)
    return chars


def _tool_calls_chars(calls: Any) -> int:
    if not isinstance(calls, list):
        return _value_chars(calls)
    chars = 0
    for call in calls:
        function = call.get("function") if type(call) is dict else None
        if type(function) is dict:
            if len(call) == 3 and len(function) == 2 and "type" in call:
                # the usual shape, {id, type, function: {name, arguments}}, counted without two loops
                call_id, name, arguments = call.get("id"), function.get("name"), function.get("arguments")
                if type(call_id) is str and type(name) is str and type(arguments) is str:
                    chars += TOOL_CALL_OVERHEAD_CHARS + len(call_id) + len(name) + len(arguments)
                    continue
            chars += TOOL_CALL_OVERHEAD_CHARS
            for value in function.values():
                chars += len(value) if type(value) is str else _value_chars(value)
            # the id and any unknown keys (e.g. a provider's thought signature); `type` is in the overhead
            for key, value in call.items():
                if key != "function" and key != "type":
                    chars += len(value) if type(value) is str else _value_chars(value)
        else:
            chars += _value_chars(call)
    return chars
