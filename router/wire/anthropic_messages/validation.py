"""Validation of an Anthropic Messages body (``POST /v1/messages``): the minimal shape, nothing more. Pure.

:func:`validate_messages_body` checks what the proxy reads and raises :class:`AnthropicInvalid`
naming the field, as Anthropic's errors do; everything else (``thinking``, ``context_management``,
``safeguards``, ``cache_control``, betas' fields, unknown block types) passes through for the
provider to judge (WHAT-USERS-HIT #8, #16). The view (:mod:`.view`) is built from its result.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from router.core.content import Message
from router.core.errors import InvalidRequest
from router.core.json_body import nests_within
from router.core.redaction import quoted
from router.core.request_view import ToolResult, Unit
from router.core.resent_prefix import Resumed
from router.wire.anthropic_messages.blocks import PROXY_THINKING_SIGNATURE, blocks_of, is_proxy_thinking
from router.wire.usage import usage_problem

# A message's role: Anthropic's two, and "system" for a mid-conversation system message, which Anthropic
# takes without a beta header on the models that have it (Claude Opus 4.8 first; the others answer 400) and
# Claude Code sends since 2.1.154, so it is passed on for the provider to judge (a chat provider gets a system
# message where it stood). The error names only the two roles every model takes (docs/conformance.md).
ROLES = ("user", "assistant", "system")
TURN_ROLES = ("user", "assistant")
_ROLE_SET = frozenset(ROLES)
_PROXY_SIGNATURES = (PROXY_THINKING_SIGNATURE, "")


class AnthropicInvalid(InvalidRequest):
    """The body is not a usable Messages request; the message names the field, as Anthropic's do
    (bounded as every wire's validation message is: :class:`~router.core.errors.InvalidRequest`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class MessagesRequest:
    """What the proxy reads of a valid body; the body itself stays the client's."""

    model: str | None
    messages: list[Message]
    stream: bool
    max_tokens: int | None
    tools: list[dict[str, Any]] | None
    proxy_thinking: bool = False  # an assistant message holds thinking the proxy made (:func:`is_proxy_thinking`)


# How the messages lie as the view's units, found once: by the fused check on its one pass over the
# messages, or by the view (layout_of) when no check ran. Units: the ``system`` (one unit), then each
# message — except that a user message's ``tool_result`` blocks are each a unit of their own (the
# block itself) and its other blocks one more unit (:mod:`.view`).


@dataclass(slots=True)
class MessagesLayout:
    """The units, the tool results (and each one's ``(message, block)`` place), the turn starts."""

    units: list[Unit] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    where: list[tuple[int, int]] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)


def is_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str)


def add_message(layout: MessagesLayout, index: int, message: Any, has_result: bool | None = None) -> None:
    """Place ``messages[index]``; ``has_result``: whether it is a user message holding a tool result,
    when the caller knows (else looked up)."""
    content = message.get("content")
    role = message.get("role")
    units = layout.units
    if role == "assistant":
        layout.turns.append(len(units))
    if has_result is None:
        has_result = role == "user" and isinstance(content, list) and any(is_result(b) for b in content)
    if not has_result:
        units.append(message)
        return
    if len(content) == 1:  # the result alone (Claude Code's tool turn): placed without the split below
        block = content[0]
        layout.results.append(ToolResult(len(units), block["tool_use_id"], block.get("content")))
        layout.where.append((index, 0))
        units.append(block)
        return
    others = []
    for b, block in enumerate(content):
        if is_result(block):
            layout.results.append(ToolResult(len(units), block["tool_use_id"], block.get("content")))
            layout.where.append((index, b))
            units.append(block)
        else:
            others.append(block)
    if others:
        units.append({"role": role, "content": others})


def start(system: Any) -> MessagesLayout:
    """An empty layout, the system its first unit when there is one."""
    layout = MessagesLayout()
    if system:
        layout.units.append({"role": "system", "content": system})
    return layout


def layout_of(system: Any, messages: list[Any]) -> MessagesLayout:
    layout = start(system)
    for index, message in enumerate(messages):
        add_message(layout, index, message)
    return layout


def has_image(content: Any) -> bool:
    """A message's content holds an image, also inside a tool result."""
    for block in blocks_of(content):
        kind = block.get("type")
        if kind == "image" or (kind == "tool_result" and has_image(block.get("content"))):
            return True
    return False


def validate_messages_body(body: Any, *, count_tokens: bool = False) -> MessagesRequest:
    """The minimal shape: ``model``, ``messages`` (roles, blocks with a ``type``, tool ids), ``max_tokens``
    (not for ``count_tokens``), ``system``, ``tools``, ``stream``. A missing ``model`` means "route for me"."""
    return _validated(body, count_tokens, None)


class CheckedMessages(NamedTuple):
    """A Messages body validated on the way to its depth walk (:func:`check_messages_body`), as
    :class:`~router.wire.openai_chat.validation.CheckedChat` is for chat.

    ``request`` is None when the body is not valid (the error waits for the depth walk, which
    answers first; ``parse`` then says why). ``walk``: the body, or a shallow copy of it whose
    ``messages`` holds only those not proven to nest within the limit with no float. What the
    same pass saw for the view: the units' ``layout``, ``has_images``, ``history_tools`` (a
    ``tool_use`` or ``tool_result`` block in the history).
    """

    request: MessagesRequest | None
    walk: Any
    layout: MessagesLayout | None = None
    has_images: bool = False
    history_tools: bool = False
    facts: MessagesFacts | None = None  # what a body that resends these messages resumes from
    reused_units: int = 0  # the leading units taken from the body this one resumed (its very objects)


@dataclass(frozen=True, slots=True)
class MessagesFacts:
    """A checked body's layout, and after each message what was placed and seen so far: ``(units,
    results, turns, has_images, history_tools, proxy_thinking)``, so a body that resends its first
    messages resumes after them (:func:`check_messages_body`). Read only: a resumed check copies."""

    layout: MessagesLayout
    marks: list[tuple[int, int, int, bool, bool, bool]]
    words: list[int]  # the user messages that may hold words (not a lone tool result), ascending: the turn text's


# The depth a proven message may reach: body 1, messages 2, message 3, content 4, block 5 and
# what the block holds below it, proven within the limit block by block (nests_within).
_BLOCK_DEPTH = 5
_PROVEN_DEPTH = 8  # below it nothing is proven (the limit itself is never set this low: 8 at least)


class _Pass:
    """What the one pass over the messages gathers besides their validation."""

    __slots__ = ("layout", "unproven", "levels", "has_images", "history_tools", "proxy_thinking", "marks", "start", "words")

    def __init__(self, system: Any, levels: int) -> None:
        self.layout = start(system)
        self.unproven: list[Any] = []
        self.levels = levels  # the levels a block may nest (itself the first) within the limit
        self.has_images = self.history_tools = self.proxy_thinking = False
        self.marks: list[tuple[int, int, int, bool, bool, bool]] = []  # see MessagesFacts
        self.start = 0  # the first message checked: those before were checked with the body resumed
        self.words: list[int] = []  # see MessagesFacts

    def resume(self, facts: MessagesFacts, count: int) -> None:
        """Start after the first ``count`` messages of the body ``facts`` are of, as that body's check left them."""
        units, results, turns, self.has_images, self.history_tools, self.proxy_thinking = facts.marks[count - 1]
        old = facts.layout
        self.layout = MessagesLayout(old.units[:units], old.results[:results], old.where[:results], old.turns[:turns])
        self.marks = facts.marks[:count]
        self.start = count
        self.words = facts.words[: bisect_left(facts.words, count)]


def check_messages_body(body: Any, max_depth: int, resumed: Resumed | None = None) -> CheckedMessages:
    """Validate ``body`` and, in the same pass over its messages, place its units and prove the
    usual messages shallow and float-free (the depth walk then skips them). ``resumed``: the body's
    first messages are an earlier accepted body's very objects (:mod:`router.core.resent_prefix`),
    checked, placed and walked then: the check starts after them, from what it left."""
    seen = _Pass(body.get("system") if isinstance(body, dict) else None, max_depth - _BLOCK_DEPTH + 1)
    facts = resumed.parent.facts if resumed is not None else None
    if type(facts) is MessagesFacts and resumed is not None and resumed.count <= len(facts.marks) and body.get("system") == resumed.parent.body.get("system"):
        seen.resume(facts, resumed.count)  # the layout's first unit is the system: resumed only when it is the same
    try:
        request = _validated(body, False, seen)
    except AnthropicInvalid:
        return CheckedMessages(None, body)
    walk = body
    if max_depth >= _PROVEN_DEPTH and len(seen.unproven) != len(request.messages):
        walk = dict(body)
        walk["messages"] = seen.unproven
    layout = seen.layout
    reused = seen.marks[seen.start - 1][0] if seen.start else 0
    return CheckedMessages(request, walk, layout, seen.has_images, seen.history_tools, MessagesFacts(layout, seen.marks, seen.words), reused)


def _validated(body: Any, count_tokens: bool, seen: _Pass | None) -> MessagesRequest:
    if not isinstance(body, dict):
        raise AnthropicInvalid("the request body must be a JSON object")
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise AnthropicInvalid("model: must be a non-empty string")
    max_tokens = body.get("max_tokens")
    if not count_tokens:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise AnthropicInvalid("max_tokens: Field required (a positive integer)")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise AnthropicInvalid("stream: must be a boolean")
    _check_system(body.get("system"))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise AnthropicInvalid("messages: a non-empty list of message objects is required")
    proxy_thinking = False
    if seen is None:
        for m, message in enumerate(messages):
            proxy_thinking |= _check_message(message, f"messages.{m}")
    else:
        proxy_thinking, marks, layout, words = seen.proxy_thinking, seen.marks, seen.layout, seen.words
        units, results, turns = layout.units, layout.results, layout.turns
        for m in range(seen.start, len(messages)):
            message = messages[m]
            proxy_thinking |= _seen_message(message, m, seen)
            if message["role"] == "user":  # valid now; a lone tool result says no words (Claude Code's tool turn)
                content = message["content"]
                if not (type(content) is list and len(content) == 1 and type(content[0]) is dict and content[0].get("type") == "tool_result"):
                    words.append(m)
            marks.append((len(units), len(results), len(turns), seen.has_images, seen.history_tools, proxy_thinking))
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise AnthropicInvalid("tools: must be a list")
        for t, tool in enumerate(tools):
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
                raise AnthropicInvalid(f"tools.{t}.name: Field required")
            if "input_schema" in tool and not isinstance(tool["input_schema"], dict):
                raise AnthropicInvalid(f"tools.{t}.input_schema: must be an object")
    for key in ("tool_choice", "thinking", "output_config", "metadata"):
        if body.get(key) is not None and not isinstance(body[key], dict):
            raise AnthropicInvalid(f"{key}: must be an object")
    stops = body.get("stop_sequences")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(s, str) for s in stops)):
        raise AnthropicInvalid("stop_sequences: must be a list of strings")
    return MessagesRequest(
        model=model,
        messages=messages,
        stream=stream,
        max_tokens=max_tokens if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) else None,
        tools=tools or None,
        proxy_thinking=proxy_thinking,
    )


def _seen_message(message: Any, m: int, seen: _Pass) -> bool:
    """:func:`_check_message` and the view's facts of one message in one pass over its blocks.

    The usual shapes (text, tool_use, tool_result of text, image, thinking) are recognised on a
    short path that checks exactly what _check_message would (:func:`_usual_message`); anything
    else, every error included, takes _check_message itself and the view's own functions."""
    role = message.get("role") if type(message) is dict else None
    if type(role) is str and role in _ROLE_SET:
        content = message.get("content")
        if type(content) is str:
            add_message(seen.layout, m, message, False)
            if len(message) != 2:
                seen.unproven.append(message)
            return False
        if type(content) is list:
            if role == "user" and len(content) == 1:  # Claude Code's tool turn: one result, its text
                block = content[0]
                if type(block) is dict and block.get("type") == "tool_result":
                    tool_use_id = block.get("tool_use_id")
                    inner = block.get("content")
                    if type(tool_use_id) is str and (inner is None or type(inner) is str):
                        add_message(seen.layout, m, message, True)
                        seen.history_tools = True
                        levels = seen.levels
                        # proven as _usual_message proves it: its keys counted, else the block walked
                        if not (
                            levels >= 1
                            and len(message) == 2
                            and (
                                len(block) == 2 + (inner is not None or "content" in block) + (type(block.get("is_error")) is bool)
                                or nests_within(block, levels)
                            )
                        ):
                            seen.unproven.append(message)
                        return False
            elif role == "assistant":  # Claude Code's step: text and tool calls holding their fields alone
                levels = seen.levels
                shallow = levels >= 1 and len(message) == 2
                calls = False
                for block in content:
                    if type(block) is not dict:
                        break
                    kind = block.get("type")
                    if kind == "text" and len(block) == 2 and type(block.get("text")) is str:
                        continue
                    if kind != "tool_use" or len(block) != 4 or type(block.get("id")) is not str or type(block.get("name")) is not str:
                        break
                    tool_input = block.get("input")
                    if type(tool_input) is not dict:
                        break
                    calls = True
                    if shallow:
                        shallow = levels > 1 and nests_within(tool_input, levels - 1)
                else:  # every block one of the two
                    add_message(seen.layout, m, message, False)
                    seen.history_tools |= calls
                    if not shallow:
                        seen.unproven.append(message)
                    return False
            proxy_thinking = _usual_message(message, content, role, m, seen)
            if proxy_thinking is not None:
                return proxy_thinking
    proxy_thinking = _check_message(message, f"messages.{m}")  # raises unless valid
    content = message.get("content")
    add_message(seen.layout, m, message)
    seen.has_images |= has_image(content)
    seen.history_tools |= isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in content)
    seen.unproven.append(message)
    return proxy_thinking


def _usual_message(message: dict[str, Any], content: list[Any], role: str, m: int, seen: _Pass) -> bool | None:
    """A message whose blocks are all of the usual shapes and valid: laid out, its facts noted,
    proven within the limit block by block when it can be (else left to the walk), and whether it
    holds thinking the proxy made; None for anything else (the long path judges it, and nothing
    of it is noted). Written flat, one loop and no call per block: it runs for every message of
    every request."""
    proxy_thinking = images = tools = False
    has_result = False
    levels = seen.levels  # the levels a block may nest (itself the first) within the limit
    shallow = levels >= 1 and len(message) == 2
    for block in content:
        if type(block) is not dict:
            return None
        kind = block.get("type")
        size = len(block)
        if kind == "text":
            if type(block.get("text")) is not str:
                return None
            if size == 2:
                continue
        elif kind == "tool_use":
            if role != "assistant" or type(block.get("id")) is not str or type(block.get("name")) is not str:
                return None
            tool_input = block.get("input")
            if type(tool_input) is not dict:
                return None
            tools = True
            if size == 4:  # type, id, name, input: the input alone is walked
                if shallow:
                    shallow = levels > 1 and nests_within(tool_input, levels - 1)
                continue
        elif kind == "tool_result":
            if role != "user" or type(block.get("tool_use_id")) is not str:
                return None
            inner = block.get("content")
            tools = has_result = True
            if inner is None or type(inner) is str:
                if size == 2 + (inner is not None or "content" in block) + (type(block.get("is_error")) is bool):
                    continue  # counted: strings, a null, a boolean
            elif type(inner) is list:
                for part in inner:
                    if type(part) is not dict or type(part.get("type")) is not str or part["type"] == "tool_result":
                        return None
                    images |= part["type"] == "image"
            else:
                return None
        elif kind == "image":
            images = True
        elif kind == "thinking":
            proxy_thinking |= role == "assistant" and block.get("signature") in _PROXY_SIGNATURES
        elif type(kind) is not str:
            return None
        if shallow:
            shallow = nests_within(block, levels)
    add_message(seen.layout, m, message, has_result)
    seen.has_images |= images
    seen.history_tools |= tools
    if not shallow:
        seen.unproven.append(message)
    return proxy_thinking


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise AnthropicInvalid("system: must be a string or a list of text blocks")
    for b, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise AnthropicInvalid(f"system.{b}: must be a text block with a string 'text'")


def _check_message(message: Any, where: str) -> bool:
    """Raises for a malformed message; whether it holds thinking the proxy made (read in this one walk)."""
    if not isinstance(message, dict):
        raise AnthropicInvalid(f"{where}: must be an object")
    role = message.get("role")
    if role not in ROLES:
        allowed = " or ".join(repr(r) for r in TURN_ROLES)
        raise AnthropicInvalid(f"{where}.role: Input should be {allowed} (got {quoted(role)})")
    content = message.get("content")
    if isinstance(content, str):
        return False
    if not isinstance(content, list):
        raise AnthropicInvalid(f"{where}.content: must be a string or a list of content blocks")
    proxy_thinking = False
    for b, block in enumerate(content):
        at = f"{where}.content.{b}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise AnthropicInvalid(f"{at}: must be an object with a string 'type'")
        kind = block["type"]
        if kind == "text" and not isinstance(block.get("text"), str):
            raise AnthropicInvalid(f"{at}.text: must be a string")
        if kind == "tool_use":
            if role != "assistant":
                raise AnthropicInvalid(f"{at}: tool_use blocks belong to assistant messages")
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise AnthropicInvalid(f"{at}: tool_use needs a string 'id' and 'name'")
            if not isinstance(block.get("input"), dict):
                raise AnthropicInvalid(f"{at}.input: must be an object")
        if kind == "tool_result":
            if role != "user":
                raise AnthropicInvalid(f"{at}: tool_result blocks belong to user messages")
            if not isinstance(block.get("tool_use_id"), str):
                raise AnthropicInvalid(f"{at}.tool_use_id: must be a string")
            inner = block.get("content")
            if inner is not None and not isinstance(inner, (str, list)):
                raise AnthropicInvalid(f"{at}.content: must be a string or a list of content blocks")
            if isinstance(inner, list) and not all(isinstance(x, dict) and isinstance(x.get("type"), str) for x in inner):
                raise AnthropicInvalid(f"{at}.content: every block must be an object with a string 'type'")
        if role == "assistant" and is_proxy_thinking(block):
            proxy_thinking = True
    return proxy_thinking


# The token counts of an Anthropic usage report.
USAGE_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
# What a block of each kind carries as a string, the values a client (or a translation) reads of it.
_BLOCK_STRINGS = {"text": ("text",), "thinking": ("thinking",), "redacted_thinking": ("data",), "tool_use": ("id", "name")}
# What a content_block_delta of each kind carries as a string.
_DELTA_STRINGS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json", "signature_delta": "signature"}


def answer_problem(answer: Any) -> str | None:
    """What makes a provider's whole answer (its JSON) no Anthropic ``message``, or None: a
    ``content`` list of blocks, each an object with a string ``type`` and the strings its kind
    carries (a text's ``text``, a ``tool_use``'s ``id`` and ``name``), a string ``id`` and
    ``stop_reason`` (or none), and a usage of token counts. What a ``tool_use``'s input holds is the
    model's (one that is no object reaches the client, whose tool refuses it)."""
    if not isinstance(answer, dict):
        return "not a JSON object"
    if answer.get("type", "message") != "message":
        return f"its type is {quoted(answer.get('type'))}, not message"
    content = answer.get("content")
    if not isinstance(content, list):
        return "its content is no list of blocks"
    for b, block in enumerate(content):
        if problem := _block_problem(block, f"content.{b}"):
            return problem
    for key in ("id", "stop_reason"):
        if answer.get(key) is not None and not isinstance(answer[key], str):
            return f"its {key} is no string"
    return usage_problem(answer.get("usage"), USAGE_COUNTS)


def event_problem(event: dict[str, Any]) -> str | None:
    """What makes one event of a provider's stream (its JSON object) none of the Messages stream's,
    or None: what :func:`answer_problem` asks of a whole answer, of the events it comes in
    (``message_start``'s message, each block started, each delta, ``message_delta``'s stop reason
    and usage). Other events (``ping``, ``message_stop``, kinds added later) are not looked into."""
    kind = event.get("type")
    if kind == "message_start":
        message = event.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content", []), list):
            return "message_start has no message with a list of blocks"
        if message.get("id") is not None and not isinstance(message["id"], str):
            return "message_start's message id is no string"
        return usage_problem(message.get("usage"), USAGE_COUNTS, "message.usage")
    if kind in ("content_block_start", "content_block_delta", "content_block_stop") and type(event.get("index")) is not int:
        return f"{kind} has no integer index"
    if kind == "content_block_start":
        return _block_problem(event.get("content_block"), "content_block")
    if kind == "content_block_delta":
        delta = event.get("delta")
        if not isinstance(delta, dict) or not isinstance(delta.get("type"), str):
            return "content_block_delta has no delta with a string type"
        name = _DELTA_STRINGS.get(delta["type"])
        return f"its {delta['type']}.{name} is no string" if name is not None and not isinstance(delta.get(name), str) else None
    if kind == "message_delta":
        delta = event.get("delta")
        if not isinstance(delta, dict) or (delta.get("stop_reason") is not None and not isinstance(delta["stop_reason"], str)):
            return "message_delta has no delta with a string stop_reason"
        return usage_problem(event.get("usage"), USAGE_COUNTS)
    return None


def _block_problem(block: Any, where: str) -> str | None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return f"{where} is no block with a string type"
    for name in _BLOCK_STRINGS.get(block["type"], ()):
        if not isinstance(block.get(name), str):
            return f"{where}.{name} is no string"
    return None


# ----------------------------------------------------------------------------------------------
# The chat view
