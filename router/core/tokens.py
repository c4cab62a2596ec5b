"""The one token estimator for the whole project (ARCHITECTURE §5).

Text counts ceil(chars / 4) per message plus a fixed per-message overhead;
tool-call names and arguments, text parts, tool results and every other string
a message carries (``reasoning_content``, ``name``, unknown keys) count; each
image part counts a fixed amount. It errs on the side of over-counting:
undercounting is what misroutes long contexts (WHAT-USERS-HIT #4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from router.core.messages import IMAGE_PART_TYPES, TEXT_PART_TYPES, Message

CHARS_PER_TOKEN = 4
TOOL_CALL_OVERHEAD_CHARS = 12  # id, type and framing of one call


@dataclass(frozen=True, slots=True)
class TokenEstimator:
    image_tokens: int = 1000
    per_message_overhead: int = 4

    def message_tokens(self, message: Message) -> int:
        return self.size_tokens(*self.message_size(message))

    def size_tokens(self, chars: int, images: int) -> int:
        """Tokens of a message that holds ``chars`` characters and ``images`` images."""
        return -(-chars // CHARS_PER_TOKEN) + self.per_message_overhead + images * self.image_tokens

    @staticmethod
    def message_size(message: Message) -> tuple[int, int]:
        """(characters, images) counted in a message; tokens follow from these alone."""
        chars = 0
        images = 0
        for key, value in message.items():
            # plain strings (role, text content, ids, names) and nulls first: same counts, less work
            if type(value) is str:
                chars += len(value)
            elif value is None:
                pass
            elif key == "content":
                part_chars, images = _content_chars(value)
                chars += part_chars
            elif key == "tool_calls":
                chars += _tool_calls_chars(value)
            else:
                chars += _value_chars(value)
        return chars, images

    def prompt_tokens(self, messages: list[Message], tools: Any = None) -> int:
        """Tokens of a whole prompt: every message plus the tool schemas sent with it."""
        total = sum(map(self.message_tokens, messages))
        if tools:
            total += -(-len(orjson.dumps(tools)) // CHARS_PER_TOKEN)
        return total


DEFAULT_ESTIMATOR = TokenEstimator()


def estimate_prompt_tokens(messages: list[Message], tools: Any = None, estimator: TokenEstimator = DEFAULT_ESTIMATOR) -> int:
    return estimator.prompt_tokens(messages, tools)


def _value_chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if value is None or isinstance(value, (bool, int, float)):
        return 0
    return len(orjson.dumps(value, default=str))


def _content_chars(content: Any) -> tuple[int, int]:
    """(characters, image count) of a message's content."""
    if isinstance(content, str):
        return len(content), 0
    if not isinstance(content, list):
        return _value_chars(content), 0
    chars = 0
    images = 0
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            chars += len(part["text"])
        elif kind in IMAGE_PART_TYPES:
            images += 1
        else:
            chars += _value_chars(part)
    return chars, images


def _tool_calls_chars(calls: Any) -> int:
    if not isinstance(calls, list):
        return _value_chars(calls)
    chars = 0
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
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
