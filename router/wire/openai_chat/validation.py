"""Validation of a chat-completions body: the minimal shape, nothing more.

The body passes upstream untouched apart from ``model`` and ``messages``, so
only what the router itself reads is checked; unknown fields, unknown content
part types and unknown message keys pass through (WHAT-USERS-HIT #8, #10).
A missing ``model`` means "route for me", like the first routing alias.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, NamedTuple

from router.core.content import Message, has_image_part
from router.core.errors import InvalidRequest
from router.core.frozen import frozen
from router.core.redaction import quoted
from router.core.resent_prefix import Resumed
from router.wire.request_fields import model_and_stream, tool_list
from router.wire.usage import usage_problem

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_ROLE_SET = frozenset(ROLES)


@frozen
class ChatRequest:
    """A valid body's fields the router reads, and what the pass that checked its messages saw
    on the way (so the view does not walk them again): ``has_images``, an image part in any
    message; ``tool_history``, a ``tool``/``function`` message or an assistant's tool calls."""

    model: str | None
    messages: list[Message]
    stream: bool
    tools: list[dict[str, Any]] | None
    has_images: bool = False
    tool_history: bool = False


# A message proven shallow nests at most this deep in the body (body 1, messages 2, message 3,
# tool_calls 4, a call 5, its function 6); below it nothing is proven.
_PROVEN_DEPTH = 6


@frozen
class ChatFacts:
    """Where a checked body's messages first held an image part and first a tool call or result
    (``len(messages)``: none), and the indexes of its user and of its tool messages, ascending: what
    the view reads (the turn text's task, the tool results) and a body that resends these messages
    resumes from (:func:`check_chat_body`). Read only: a resumed check copies."""

    first_image: int
    first_tool: int
    users: list[int]
    results: list[int]


class CheckedChat(NamedTuple):
    """A chat body validated on the way to its depth walk (:func:`check_chat_body`).

    ``request`` is None when the body is not valid (:func:`validate_chat_body` says why: the
    error waits for the depth walk, since a too-deep body is refused as that whatever else is
    wrong with it). ``walk`` is what the depth walk still has to cover for the body's answer:
    the body itself, or a shallow copy of it whose ``messages`` holds only the messages not
    proven to nest within the limit with no float (the others cannot change the walk's answer).
    ``facts``: what the next body that resends these messages resumes from; ``reused``: the
    leading messages this body took from an earlier one, checked then.
    """

    request: ChatRequest | None
    walk: Any
    facts: ChatFacts | None = None
    reused: int = 0


def check_chat_body(body: Any, max_depth: int, resumed: Resumed | None = None) -> CheckedChat:
    """Validate ``body`` and, in the same pass over its messages, prove the usual ones shallow and float-free.

    ``resumed``: the body's leading messages are an earlier accepted body's very objects
    (:mod:`router.core.resent_prefix`), checked and walked then: only the messages after them are.
    """
    start, earlier = 0, None
    if resumed is not None and type(resumed.parent.facts) is ChatFacts:
        start, earlier = resumed.count, resumed.parent.facts
    try:
        request, unproven, facts = _validated(body, max_depth >= _PROVEN_DEPTH, start, earlier)
    except InvalidRequest:
        return CheckedChat(None, body)
    if unproven is None:
        return CheckedChat(request, body, facts, start)
    walk = dict(body)
    walk["messages"] = unproven
    return CheckedChat(request, walk, facts, start)


def validate_chat_body(body: Any) -> ChatRequest:
    return _validated(body, False)[0]


def _validated(body: Any, prove: bool, start: int = 0, earlier: ChatFacts | None = None) -> tuple[ChatRequest, list[Any] | None, ChatFacts]:
    """The valid body's ChatRequest, when ``prove`` its messages not proven shallow and float-free,
    and its facts; the messages before ``start`` are taken as checked, with ``earlier``'s facts."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    model, stream = model_and_stream(body)
    for key in ("max_tokens", "max_completion_tokens"):
        _check_positive_int(body.get(key), key)
    _check_object(body, "response_format", required_str="type")
    _check_object(body, "stream_options")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array of message objects", "messages")
    first_image = first_tool = len(messages)
    if earlier is not None:  # what the messages taken as checked held
        first_image = earlier.first_image if earlier.first_image < start else first_image
        first_tool = earlier.first_tool if earlier.first_tool < start else first_tool
    has_images, tool_history = first_image < start, first_tool < start
    users = earlier.users[: bisect_left(earlier.users, start)] if earlier is not None else []
    results = earlier.results[: bisect_left(earlier.results, start)] if earlier is not None else []
    unproven: list[Any] | None = [] if prove else None
    for i, message in enumerate(messages[start:] if start else messages, start):
        # The usual shapes (text content, a tool result, an assistant's function calls) are
        # recognised on a short path that checks exactly what _check_message would; anything
        # else, every error included, takes _check_message itself. ~2× cheaper per message.
        if type(message) is dict:
            role = message.get("role")
            content = message.get("content")
            calls = message.get("tool_calls")
            if (
                type(role) is str
                and role in _ROLE_SET
                and (content is None or type(content) is str)
                and (role != "tool" or type(message.get("tool_call_id")) is str)
                and (calls is None or (role == "assistant" and type(calls) is list and _plain_calls(calls)))
            ):
                if role == "tool":
                    results.append(i)
                    if not tool_history:
                        tool_history, first_tool = True, i
                elif role == "user":
                    users.append(i)
                elif not tool_history and (role == "function" or calls):
                    tool_history, first_tool = True, i
                # Shallow and float-free when it holds no key but those just checked (each a
                # string, null or plain calls): counted, not walked, as that is what pays.
                if unproven is not None and (
                    len(message) != 1 + ("content" in message) + (role == "tool") + (calls is not None)
                    or (calls is not None and not _bare_calls(calls))
                ):
                    unproven.append(message)
                continue
        _check_message(message, i)
        if unproven is not None:
            unproven.append(message)
        # valid, then: a dict with a string role
        if not has_images and has_image_part(message.get("content")):
            has_images, first_image = True, i
        if not tool_history and (message["role"] in ("tool", "function") or message.get("tool_calls")):
            tool_history, first_tool = True, i
        if message["role"] == "tool":
            results.append(i)
        elif message["role"] == "user":
            users.append(i)
    tools = tool_list(body, _check_tool)
    request = ChatRequest(model=model, messages=messages, stream=stream is True, tools=tools or None, has_images=has_images, tool_history=tool_history)
    return request, unproven, ChatFacts(first_image, first_tool, users, results)


def offers_tools(body: dict[str, Any]) -> bool:
    """The request offers the model tools (``tools``, or the legacy ``functions``)."""
    return bool(body.get("tools") or body.get("functions"))


def requested_max_tokens(body: dict[str, Any]) -> int | None:
    """The output budget the client asked for (``max_completion_tokens`` wins)."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _check_positive_int(value: Any, param: str) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidRequest(f"'{param}' must be a positive integer", param)


def _check_object(body: dict[str, Any], key: str, required_str: str | None = None) -> None:
    value = body.get(key)
    if value is None:
        return
    if not isinstance(value, dict):
        raise InvalidRequest(f"'{key}' must be an object", key)
    if required_str is not None and not isinstance(value.get(required_str), str):
        raise InvalidRequest(f"'{key}.{required_str}' must be a string", f"{key}.{required_str}")


def _message_error(index: int, field: str, problem: str) -> InvalidRequest:
    """The error for ``messages[index]`` + ``field``: the place is spelled out only here, never for a valid message."""
    where = f"messages[{index}]{field}"
    return InvalidRequest(f"'{where}' {problem}", where)


def _check_message(message: Any, index: int) -> None:
    if not isinstance(message, dict):
        raise _message_error(index, "", "must be an object")
    role = message.get("role")
    if not isinstance(role, str):
        raise _message_error(index, ".role", "is missing or not a string")
    if role not in ROLES:
        raise _message_error(index, ".role", f"is {quoted(role)}, not one of {', '.join(ROLES)}")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        if not isinstance(content, list):
            raise _message_error(index, ".content", "must be a string, an array of content parts, or null")
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise _message_error(index, f".content[{j}]", "must be an object with a string 'type'")
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise _message_error(index, f".content[{j}].text", "must be a string")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise _message_error(index, ".tool_call_id", "must be a string on a tool message")
    calls = message.get("tool_calls")
    if calls is not None:
        if role != "assistant":
            raise _message_error(index, ".tool_calls", "is only allowed on assistant messages")
        if not isinstance(calls, list):
            raise _message_error(index, ".tool_calls", "must be an array")
        for j, call in enumerate(calls):
            _check_tool_call(call, index, j)


def _plain_calls(calls: list[Any]) -> bool:
    """Every call is ``{id: str, function: {name: str, arguments: str}, ...}``: what _check_tool_call accepts, on a short path."""
    for call in calls:
        if type(call) is not dict or type(call.get("id")) is not str:
            return False
        function = call.get("function")
        if type(function) is not dict or type(function.get("name")) is not str or type(function.get("arguments")) is not str:
            return False
    return True


def _bare_calls(calls: list[Any]) -> bool:
    """Plain calls (:func:`_plain_calls`) with no key beyond ``id``, ``function`` and a string ``type``, nor in ``function``."""
    for call in calls:
        if not (len(call) == 2 or (len(call) == 3 and type(call.get("type")) is str)) or len(call["function"]) != 2:
            return False
    return True


def _check_tool_call(call: Any, index: int, j: int) -> None:
    if not isinstance(call, dict):
        raise _message_error(index, f".tool_calls[{j}]", "must be an object")
    if not isinstance(call.get("id"), str):
        raise _message_error(index, f".tool_calls[{j}].id", "must be a string")
    function = call.get("function")
    if not isinstance(function, dict):
        raise _message_error(index, f".tool_calls[{j}].function", "must be an object")
    if not isinstance(function.get("name"), str):
        raise _message_error(index, f".tool_calls[{j}].function.name", "must be a string")
    if not isinstance(function.get("arguments"), str):
        raise _message_error(index, f".tool_calls[{j}].function.arguments", "must be a string (JSON text)")


def _check_tool(tool: Any, where: str) -> None:
    if not isinstance(tool, dict):
        raise InvalidRequest(f"'{where}' must be an object", where)
    if tool.get("type", "function") != "function":
        return  # other tool types (e.g. custom) pass through for the provider to judge
    function = tool.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
        raise InvalidRequest(f"'{where}.function.name' must be a non-empty string", f"{where}.function.name")
    params = function.get("parameters")
    if params is not None and not isinstance(params, dict):
        raise InvalidRequest(f"'{where}.function.parameters' must be an object", f"{where}.function.parameters")


# The token counts of a chat usage report.
USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")
# What an assistant message (or a stream's delta of one) carries as a string when it carries it.
_MESSAGE_STRINGS = ("role", "refusal", "reasoning_content", "reasoning")


def answer_problem(answer: Any) -> str | None:
    """What makes a provider's whole answer (its JSON) no chat completion, or None: what every
    client reads first — ``choices[0].message`` — must be there, and what it reads of it of the
    right types (:func:`_message_problem`), a string ``finish_reason`` (or none) and a usage of token
    counts. Everything else (vendor fields, the message's other keys) is the provider's to write."""
    if not isinstance(answer, dict):
        return "not a JSON object"
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices:
        return "no choices"
    first = choices[0]
    if not isinstance(first, dict) or not isinstance(first.get("message"), dict):
        return "choices[0] has no message object"
    return _choice_problem(first, "message", "choices[0]") or usage_problem(answer.get("usage"), USAGE_COUNTS)


def chunk_problem(chunk: dict[str, Any]) -> str | None:
    """What makes one chunk of a provider's stream (its JSON object) no ``chat.completion.chunk``, or
    None: its ``choices`` (none, in a usage chunk) each an object whose ``delta`` is read as
    :func:`answer_problem` reads a message, and a usage of token counts."""
    choices = chunk.get("choices")
    if choices is not None and not isinstance(choices, list):
        return "its choices are no list"
    for c, choice in enumerate(choices or ()):
        if not isinstance(choice, dict):
            return f"choices[{c}] is no object"
        if choice.get("delta") is not None and not isinstance(choice["delta"], dict):
            return f"choices[{c}].delta is no object"
        if problem := _choice_problem(choice, "delta", f"choices[{c}]"):
            return problem
    return usage_problem(chunk.get("usage"), USAGE_COUNTS)


def _choice_problem(choice: dict[str, Any], key: str, where: str) -> str | None:
    """A choice's ``finish_reason`` and its ``message`` (or ``delta``): content a string (or parts,
    or none), the strings an assistant message carries, tool calls a list of objects whose function
    names and arguments are strings."""
    if choice.get("finish_reason") is not None and not isinstance(choice["finish_reason"], str):
        return f"{where}.finish_reason is no string"
    message = choice.get(key) or {}
    where = f"{where}.{key}"
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        return f"{where}.content is no string"
    for name in _MESSAGE_STRINGS:
        if message.get(name) is not None and not isinstance(message[name], str):
            return f"{where}.{name} is no string"
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        return f"{where}.tool_calls is no list"
    for t, call in enumerate(calls or ()):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or (function is not None and not isinstance(function, dict)):
            return f"{where}.tool_calls[{t}] is no call with a function object"
        for name, value in (("id", call.get("id")), ("function.name", (function or {}).get("name")), ("function.arguments", (function or {}).get("arguments"))):
            if value is not None and not isinstance(value, str):
                return f"{where}.tool_calls[{t}].{name} is no string"
    return None
