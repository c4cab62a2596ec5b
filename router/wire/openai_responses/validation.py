"""Validation of an OpenAI Responses API body, stateless (Codex CLI's use). Pure.

The proxy keeps no responses, so it serves the Responses API the way Codex
uses it: ``store: false`` and the whole conversation in ``input``. A request
that only works with state kept on a server is refused with a 400 naming the
field, before any upstream is asked, rather than answered wrongly:

* ``previous_response_id``, ``conversation`` and ``item_reference`` items point
  at stored responses or items;
* ``store: true`` (sent explicitly) and ``background: true`` ask for an answer
  to be fetched later (``GET /v1/responses/{id}``), which the proxy cannot serve.

``store`` left out is accepted as stateless (the SDK's default call sends none).

As with chat (:mod:`router.wire.openai_chat.validation`), only what the router reads is
checked; unknown fields, item types and part types pass through for a
Responses-speaking provider to judge (WHAT-USERS-HIT #8, #10).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Any, NamedTuple

from router.core.content import IMAGE_PART_TYPES
from router.core.errors import InvalidRequest
from router.core.json_body import nests_within
from router.core.redaction import quoted
from router.core.resent_prefix import Resumed
from router.wire.openai_responses.compaction import ITEM, proxy_summary
from router.wire.request_fields import model_and_stream, tool_list
from router.wire.usage import usage_problem

Item = dict[str, Any]

MESSAGE_ROLES = ("user", "assistant", "system", "developer")
_ROLE_SET = frozenset(MESSAGE_ROLES)
TEXT_PARTS = ("input_text", "output_text")
# A tool's result: a function's output, or a custom (freeform) tool's (Codex's code-mode ``exec``), each
# answering the call of the same ``call_id``; the calls, whose ``name`` a result's tool is.
RESULT_ITEM_TYPES = ("function_call_output", "custom_tool_call_output")
CALL_ITEM_TYPES = ("function_call", "custom_tool_call")
# Fields that name state kept on a server; each gets a 400 naming it.
STATEFUL_FIELDS = {
    "previous_response_id": "it names a response stored on the server",
    "conversation": "it names a conversation stored on the server",
}
STATELESS_HINT = "pinch-router keeps no responses: send the whole conversation in 'input' with 'store': false"


@dataclass(frozen=True, slots=True)
class ResponsesRequest:
    """A valid Responses body, read. ``items``: ``input`` as items (a plain string is one user message)."""

    model: str | None  # None: the client named no model (route for me)
    stream: bool
    items: tuple[Item, ...]
    instructions: str | None
    tools: tuple[dict[str, Any], ...]
    output_limit: int | None
    proxy_items: bool = False  # ``input`` holds an item the proxy made (:func:`is_proxy_item`)


def validate_responses_body(body: Any) -> ResponsesRequest:
    """The request read from ``body``, or :class:`InvalidRequest` naming the offending field."""
    return _validated(body, None)


@dataclass(slots=True)
class ItemScan:
    """What one pass over the items found for the view: the index of each ``function_call_output``
    and ``custom_tool_call_output`` (the results), each call's name by its ``call_id``, a call or
    output in the history, an image, and the index of each user message (where the turn text's task
    is looked for)."""

    results: list[int] = field(default_factory=list)
    names: dict[str, Any] = field(default_factory=dict)
    history_tools: bool = False
    has_images: bool = False
    users: list[int] = field(default_factory=list)


class CheckedResponses(NamedTuple):
    """A Responses body validated on the way to its depth walk (:func:`check_responses_body`), as
    :class:`~router.wire.openai_chat.validation.CheckedChat` is for chat: ``request`` None when it
    is invalid (``parse`` says why, after the depth walk); ``walk``, the body or a shallow copy
    whose ``input`` holds only the items not proven to nest within the limit with no float;
    ``scan``, what the same pass saw for the view."""

    request: ResponsesRequest | None
    walk: Any
    scan: ItemScan | None = None
    facts: ResponsesFacts | None = None  # what a body that resends these items resumes from
    reused: int = 0  # the leading items taken from the body this one resumed (its very objects)


@dataclass(frozen=True, slots=True)
class ResponsesFacts:
    """A checked body's scan, and after each item what it had found so far: ``(results, names,
    history_tools, has_images, users, proxy_items)`` (``results``, ``names`` and ``users``
    counted: each is only ever added to), so a body that resends its first items resumes
    after them (:func:`check_responses_body`). Read only: a resumed check copies."""

    scan: ItemScan
    marks: list[tuple[int, int, bool, bool, int, bool]]


_ITEM_DEPTH = 3  # body 1, input 2, an item 3
_PROVEN_DEPTH = 8  # below it nothing is proven (the limit is never set this low: 8 at least)


class _Pass:
    __slots__ = ("scan", "unproven", "levels", "marks", "start", "proxy_items")

    def __init__(self, levels: int) -> None:
        self.scan = ItemScan()
        self.unproven: list[Any] = []
        self.levels = levels  # the levels an item may nest (itself the first) within the limit
        self.marks: list[tuple[int, int, bool, bool, int, bool]] = []  # see ResponsesFacts
        self.start = 0  # the first item checked: those before were checked with the body resumed
        self.proxy_items = False

    def resume(self, facts: ResponsesFacts, count: int) -> None:
        """Start after the first ``count`` items of the body ``facts`` are of, as that body's check left them."""
        results, names, history_tools, has_images, users, self.proxy_items = facts.marks[count - 1]
        old = facts.scan
        self.scan = ItemScan(old.results[:results], dict(islice(old.names.items(), names)), history_tools, has_images, old.users[:users])
        self.marks = facts.marks[:count]
        self.start = count


def check_responses_body(body: Any, max_depth: int, resumed: Resumed | None = None) -> CheckedResponses:
    """Validate ``body`` and, in the same pass over its items, gather the view's facts and prove
    the usual items shallow and float-free (the depth walk then skips them). ``resumed``: the body's
    first items are an earlier accepted body's very objects (:mod:`router.core.resent_prefix`),
    checked and walked then: the check starts after them, from what it left."""
    seen = _Pass(max_depth - _ITEM_DEPTH + 1)
    facts = resumed.parent.facts if resumed is not None else None
    if type(facts) is ResponsesFacts and resumed is not None and resumed.count <= len(facts.marks):
        seen.resume(facts, resumed.count)
    try:
        request = _validated(body, seen)
    except InvalidRequest:
        return CheckedResponses(None, body)
    walk = body
    if max_depth >= _PROVEN_DEPTH and isinstance(body.get("input"), list) and len(seen.unproven) != len(request.items):
        walk = dict(body)
        walk["input"] = seen.unproven
    return CheckedResponses(request, walk, seen.scan, ResponsesFacts(seen.scan, seen.marks), seen.start)


def _validated(body: Any, seen: _Pass | None) -> ResponsesRequest:
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    model, stream = model_and_stream(body)
    _check_stateless(body)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequest("'instructions' must be a string", "instructions")
    limit = body.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise InvalidRequest("'max_output_tokens' must be a positive integer", "max_output_tokens")
    text = body.get("text")
    if text is not None:
        if not isinstance(text, dict):
            raise InvalidRequest("'text' must be an object", "text")
        format_ = text.get("format")
        if format_ is not None and (not isinstance(format_, dict) or not isinstance(format_.get("type"), str)):
            raise InvalidRequest("'text.format' must be an object with a string 'type'", "text.format")
    items = input_items(body.get("input"))
    proxy_items = False
    if seen is None:
        for i, item in enumerate(items):
            proxy_items |= _check_item(item, f"input[{i}]")
    else:
        proxy_items, marks, scan = seen.proxy_items, seen.marks, seen.scan
        results, names, users = scan.results, scan.names, scan.users
        for i in range(seen.start, len(items)):
            proxy_items |= _seen_item(items[i], i, seen)
            marks.append((len(results), len(names), scan.history_tools, scan.has_images, len(users), proxy_items))
    tools = tool_list(body, _check_tool)
    choice = body.get("tool_choice")
    if choice is not None and not isinstance(choice, (str, dict)):
        raise InvalidRequest("'tool_choice' must be a string or an object", "tool_choice")
    return ResponsesRequest(
        model=model,
        stream=bool(stream),
        items=tuple(items),
        instructions=instructions,
        tools=tuple(tools or ()),
        output_limit=limit,
        proxy_items=proxy_items,
    )


def _usual_parts(content: Any) -> bool | None:
    """For a string or parts of the usual shapes, all valid: whether one is an image; None for
    anything else (the long path, :func:`_check_parts`, judges it)."""
    if type(content) is str:
        return False
    if type(content) is not list:
        return None
    image = False
    for part in content:
        if type(part) is not dict:
            return None
        kind = part.get("type")
        if kind in TEXT_PARTS:
            if type(part.get("text")) is not str:
                return None
        elif type(kind) is not str or kind == "input_image":
            return None
        image |= kind in IMAGE_PART_TYPES
    return image


def _seen_item(item: Any, i: int, seen: _Pass) -> bool:
    """:func:`_check_item` and the view's facts of one item in one pass. The usual items (text
    messages, calls, outputs, reasoning) take a short path that checks exactly what _check_item
    would, and proves them within the limit by counting their fields where they hold nothing but
    those and a string ``id`` or ``status`` (a call, an output of text, a message of text or of bare
    text parts), else by walking them; anything else, every error included, takes _check_item
    itself. Each kind returns from its own branch, with no call on the usual path: this runs for
    every item of every request."""
    scan = seen.scan
    if type(item) is dict:
        kind = item.get("type")
        if kind == "function_call_output" or kind == "custom_tool_call_output":
            output = item.get("output")
            if type(item.get("call_id")) is str:
                if type(output) is str:  # type, call_id, output: counted
                    scan.results.append(i)
                    scan.history_tools = True
                    if len(item) != 3 and _beside_id(item) != 3 and not nests_within(item, seen.levels):
                        seen.unproven.append(item)
                    return False
                image = _usual_parts(output)
                if image is not None:
                    scan.results.append(i)
                    scan.history_tools = True
                    scan.has_images |= image
                    if not nests_within(item, seen.levels):
                        seen.unproven.append(item)
                    return False
        elif kind == "function_call":
            call_id = item.get("call_id")
            name = item.get("name")
            if type(call_id) is str and type(name) is str and type(item.get("arguments")) is str:  # type, call_id, name, arguments: counted
                scan.names.setdefault(call_id, name)
                scan.history_tools = True
                if len(item) != 4 and _beside_id(item) != 4 and not nests_within(item, seen.levels):
                    seen.unproven.append(item)
                return False
        elif kind == "message" or (kind is None and "role" in item):
            role = item.get("role")
            content = item.get("content")
            if type(role) is str and role in _ROLE_SET:
                if role == "user":
                    scan.users.append(i)
                fields = 2 + ("type" in item)  # role, content (and type): counted when their content is
                counted = len(item) == fields or _beside_id(item) == fields
                levels = seen.levels
                if type(content) is str:
                    if not counted and not nests_within(item, levels):
                        seen.unproven.append(item)
                    return False
                image = _usual_parts(content)
                if image is not None:
                    scan.has_images |= image
                    # text parts holding nothing but their type and text (item 1, content 2, part 3)
                    if not (counted and levels >= 3 and all(len(part) == 2 and part.get("type") in TEXT_PARTS for part in content)) and not nests_within(item, levels):
                        seen.unproven.append(item)
                    return False
        elif type(kind) is str and kind != "item_reference":  # reasoning and the other kinds: walked
            if kind == "custom_tool_call" and type(item.get("call_id")) is str:  # a custom tool's call: its name
                scan.names.setdefault(item["call_id"], item.get("name"))
                scan.history_tools = True
            if not nests_within(item, seen.levels):
                seen.unproven.append(item)
            return is_proxy_item(item)
    proxy_items = _check_item(item, f"input[{i}]")  # raises unless valid
    kind = item_type(item)
    if kind == "message" and item.get("role") == "user":
        scan.users.append(i)
    if is_result_item(item):
        scan.results.append(i)
    elif kind in CALL_ITEM_TYPES and isinstance(item.get("call_id"), str):
        scan.names.setdefault(item["call_id"], item.get("name"))
    scan.history_tools |= kind in CALL_ITEM_TYPES or kind in RESULT_ITEM_TYPES
    scan.has_images |= has_image(item)
    seen.unproven.append(item)
    return proxy_items


def _beside_id(item: dict[str, Any]) -> int:
    """How many fields an item holds besides a string ``id`` and a string ``status`` (asked only of an
    item that does not count out at once: a call, an output or a message with either)."""
    return len(item) - (type(item.get("id")) is str) - (type(item.get("status")) is str)


def is_result_item(item: Item) -> bool:
    """A tool's result pinch may read and rewrite: a ``function_call_output`` (checked valid), or a
    ``custom_tool_call_output`` with a string ``call_id`` and an ``output`` that is a string or a list
    (the item passes as sent otherwise: :func:`_check_item` does not judge it)."""
    kind = item.get("type")
    if kind == "function_call_output":
        return True
    return kind == "custom_tool_call_output" and type(item.get("call_id")) is str and isinstance(item.get("output"), (str, list))


def has_image(item: Item) -> bool:
    """A message's content or a call output holds an image part."""
    kind = item_type(item)
    content = item.get("content") if kind == "message" else item.get("output") if kind in RESULT_ITEM_TYPES else None
    return isinstance(content, list) and any(isinstance(p, dict) and p.get("type") in IMAGE_PART_TYPES for p in content)


def _check_stateless(body: dict[str, Any]) -> None:
    for field, why in STATEFUL_FIELDS.items():
        if body.get(field) is not None:
            raise InvalidRequest(f"'{field}' is not supported: {why}; {STATELESS_HINT}", field)
    if body.get("store") is True:
        raise InvalidRequest(f"'store': true is not supported: a stored response could not be fetched later; {STATELESS_HINT}", "store")
    if body.get("store") not in (None, False):
        raise InvalidRequest("'store' must be a boolean", "store")
    if body.get("background") is True:
        raise InvalidRequest(f"'background': true is not supported: its answer would have to be fetched later; {STATELESS_HINT}", "background")


def input_items(value: Any) -> list[Item]:
    """``input`` as items: a plain string is one user message."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise InvalidRequest("'input' must be a string or a non-empty array of input items", "input")
    return value


# Items the model produced (its turn), as opposed to the client's messages and tool outputs.
MODEL_ITEM_TYPES = frozenset({"reasoning", "function_call", "custom_tool_call", "web_search_call", "file_search_call", "computer_call", "local_shell_call", "image_generation_call", "code_interpreter_call", "mcp_call"})


def is_model_item(item: Item) -> bool:
    kind = item.get("type")  # item_type, inline: read for every item, some more than once
    if type(kind) is not str:
        kind = "message"
    return kind in MODEL_ITEM_TYPES or (kind == "message" and item.get("role") == "assistant")


def item_type(item: Item) -> str:
    """An item's type; an item with a ``role`` and no ``type`` is a message (the "easy" input form)."""
    type_ = item.get("type")
    return type_ if isinstance(type_, str) else "message"


# The id of a reasoning item the proxy made from a chat model's thinking (``rs_pinch_<hex>_<n>``):
# OpenAI's own are ``rs_`` and hex, which has no 'p', 'i', 'n' or 'h'.
PROXY_REASONING_ID_PREFIX = "rs_pinch"


def is_proxy_reasoning(item: Any) -> bool:
    """A reasoning item the proxy made: its id, and no ``encrypted_content`` (the proxy has none to give).

    Sent to a Responses provider with ``store: false`` it names an item the provider never
    stored, which OpenAI refuses ("Item with id 'rs_…' not found"), so a passed-through
    request leaves it out (:func:`router.wire.openai_responses.view.body_with_changes`).
    """
    return (
        isinstance(item, dict)
        and item.get("type") == "reasoning"
        and str(item.get("id", "")).startswith(PROXY_REASONING_ID_PREFIX + "_")
        and not item.get("encrypted_content")
    )


def is_proxy_item(item: dict[str, Any]) -> bool:
    """An item the proxy made that no provider can be sent as it is: a reasoning item (:func:`is_proxy_reasoning`)
    or a compaction item holding a chat model's summary (:func:`~router.wire.openai_responses.compaction.proxy_summary`)."""
    kind = item.get("type")
    return (kind == "reasoning" and is_proxy_reasoning(item)) or (kind == ITEM and proxy_summary(item) is not None)


def _check_item(item: Any, where: str) -> bool:
    """Raises for a malformed item; whether it is an item the proxy made (:func:`is_proxy_item`, read in this one walk)."""
    if not isinstance(item, dict):
        raise InvalidRequest(f"'{where}' must be an object", where)
    type_ = item.get("type")
    if type_ is None and "role" not in item:
        raise InvalidRequest(f"'{where}' needs a 'type' (or a 'role', for a message)", f"{where}.type")
    if type_ is not None and not isinstance(type_, str):
        raise InvalidRequest(f"'{where}.type' must be a string", f"{where}.type")
    kind = item_type(item)
    if kind == "message":
        _check_message(item, where)
    elif kind == "function_call":
        for key in ("call_id", "name", "arguments"):
            _check_str(item, key, where)
    elif kind == "function_call_output":
        _check_str(item, "call_id", where)
        output = item.get("output")
        if not isinstance(output, (str, list)):
            raise InvalidRequest(f"'{where}.output' must be a string or an array of content parts", f"{where}.output")
        _check_parts(output, f"{where}.output")
    elif kind == "item_reference":
        raise InvalidRequest(f"'{where}' is an item_reference, which names an item stored on the server; {STATELESS_HINT}", where)
    # reasoning and every other item type pass as sent
    return is_proxy_item(item)


def _check_message(item: Item, where: str) -> None:
    role = item.get("role")
    if role not in MESSAGE_ROLES:
        raise InvalidRequest(f"'{where}.role' is {quoted(role)}, not one of {', '.join(MESSAGE_ROLES)}", f"{where}.role")
    content = item.get("content")
    if not isinstance(content, (str, list)):
        raise InvalidRequest(f"'{where}.content' must be a string or an array of content parts", f"{where}.content")
    _check_parts(content, f"{where}.content")


def _check_parts(content: str | list[Any], where: str) -> None:
    if isinstance(content, str):
        return
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise InvalidRequest(f"'{at}' must be an object with a string 'type'", at)
        if part["type"] in ("input_text", "output_text") and not isinstance(part.get("text"), str):
            raise InvalidRequest(f"'{at}.text' must be a string", f"{at}.text")
        if part["type"] == "input_image" and not isinstance(part.get("image_url"), str) and not isinstance(part.get("file_id"), str):
            raise InvalidRequest(f"'{at}' needs an 'image_url' (a URL or data URL) or a 'file_id'", f"{at}.image_url")


def _check_str(item: Item, key: str, where: str) -> None:
    if not isinstance(item.get(key), str):
        raise InvalidRequest(f"'{where}.{key}' must be a string", f"{where}.{key}")


def _check_tool(tool: Any, where: str) -> None:
    if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
        raise InvalidRequest(f"'{where}' must be an object with a string 'type'", where)
    if tool["type"] != "function":
        return  # namespace, web_search, custom, …: the provider's to judge (translation drops them)
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise InvalidRequest(f"'{where}.name' must be a non-empty string", f"{where}.name")
    params = tool.get("parameters")
    if params is not None and not isinstance(params, dict):
        raise InvalidRequest(f"'{where}.parameters' must be an object", f"{where}.parameters")


# The token counts of a Responses usage report.
USAGE_COUNTS = ("input_tokens", "output_tokens", "total_tokens")
# What an output item of each kind carries as a string.
_ITEM_STRINGS = {"function_call": ("call_id", "name", "arguments")}


def answer_problem(answer: Any) -> str | None:
    """What makes a provider's whole answer (its JSON) no Responses ``response``, or None: an
    ``output`` list of items, each an object with a string ``type`` (a message's parts with string
    text, a function call's id, name and arguments strings), and a usage of token counts."""
    if not isinstance(answer, dict):
        return "not a JSON object"
    output = answer.get("output")
    if not isinstance(output, list):
        return "its output is no list of items"
    for i, item in enumerate(output):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            return "an output item is no object with a string type"
        for name in _ITEM_STRINGS.get(item["type"], ()):
            if not isinstance(item.get(name), str):
                return f"output.{i}.{name} is no string"
        content = item.get("content") if item["type"] == "message" else None
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and "text" in part and not isinstance(part["text"], str):
                return f"output.{i}'s text is no string"
    return usage_problem(answer.get("usage"), USAGE_COUNTS)
