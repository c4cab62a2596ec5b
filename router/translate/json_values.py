"""JSON values the translations read and write alike: a request's body, a call's arguments and an answer's body as
objects, its stop sequences; turns of a format whose roles alternate, a translated stream's usage. Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from router.core.errors import InvalidRequest
from router.core.json_body import loads
from router.translate.protocol import MalformedAnswer


def tool_input(arguments: Any) -> dict[str, Any]:
    """Tool-call arguments (JSON text) as a ``tool_use`` input object; not an object ⇒ ``{"arguments": text}``."""
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": arguments}


def tool_arguments(value: Any) -> str:
    """A ``tool_use`` input as chat's arguments (JSON text); text, which no input should be, as it
    came (:func:`tool_input`'s way back): the client's tool refuses it as it would refuse the model's
    own broken arguments."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def answer_object(raw: bytes | Any) -> dict[str, Any]:
    """A provider's whole answer as a JSON object ({} when it is another JSON value):
    its bytes, or its JSON already parsed (the exchange parsed it to check it is JSON: it is
    not parsed twice); :class:`~router.translate.protocol.MalformedAnswer` when it is not JSON."""
    if isinstance(raw, (bytes, bytearray, memoryview, str)):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise MalformedAnswer(f"not JSON ({len(raw)} bytes)") from None
    else:
        value = raw
    return value if isinstance(value, dict) else {}


def checked_answer(raw: bytes | Any, problem_of: Callable[[Any], str | None], kind: str) -> dict[str, Any]:
    """:func:`answer_object`, and :class:`~router.translate.protocol.MalformedAnswer` ("not <kind>: …")
    when ``problem_of`` (the provider wire's ``answer_problem``) finds it none of that wire's answers."""
    return checked_event(answer_object(raw), problem_of, kind)


def checked_event(event: dict[str, Any], problem_of: Callable[[Any], str | None], kind: str) -> dict[str, Any]:
    """``event`` (a provider's answer, or one event of its stream, parsed), or
    :class:`~router.translate.protocol.MalformedAnswer` ("not <kind>: …") when ``problem_of`` (the
    provider wire's check) finds it none of that wire's: a value of the wrong type is never read as
    nothing (an empty answer, a usage of zeros)."""
    problem = problem_of(event)
    if problem is not None:
        raise MalformedAnswer(f"not {kind}: {problem}")
    return event


def request_object(raw: bytes | dict[str, Any]) -> dict[str, Any]:
    """The body a client's wire adapter made for a translation to read, as a JSON object: the
    dict itself (:meth:`~router.wire.WireAdapter.translation_source`: never serialised and read
    back), or its bytes.

    It holds every number as the client wrote it (:mod:`router.core.json_body`): in the dict, a
    literal no double holds (``1e400``) is an ``orjson.Fragment`` written back as it came; bytes
    that hold one, which orjson refuses, are read again keeping those as written, so the
    translation carries them on as a pass-through would, instead of failing.
    """
    value = raw if isinstance(raw, dict) else loads(raw)
    return value if isinstance(value, dict) else {}


def stop_sequences(body: dict[str, Any]) -> list[Any] | None:
    """A chat body's ``stop`` as the list a provider of another format takes (None: none asked for);
    :class:`~router.core.errors.InvalidRequest` naming it when it is neither a string nor an array
    (a number, a boolean, an object): no list can carry it. An array's items are the provider's to judge."""
    stop = body.get("stop")
    if not stop:
        return None
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list):
        return stop
    raise InvalidRequest("'stop' must be a string or an array of strings", "stop")


def add_turn(turns: list[dict[str, Any]], role: str, items: list[dict[str, Any]], key: str) -> None:
    """Append ``items`` as a ``role`` turn (its ``key``: Anthropic's ``content``, Gemini's ``parts``), into the
    last turn when that one has the role: those formats alternate roles, so consecutive turns are one."""
    if not items:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1][key] += items
    else:
        turns.append({"role": role, key: items})


def chat_stream(body: dict[str, Any]) -> dict[str, Any]:
    """What a chat request translated from ``body`` says of streaming: a stream asks for its usage chunk, so
    that the answer translated back reports real usage (the client's format reports it at its end)."""
    return {"stream": True, "stream_options": {"include_usage": True}} if body.get("stream") is True else {}


def first_choice(completion: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A chat completion's first choice and that choice's ``message``, each {} where the answer has none."""
    choices = completion.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    return choice, message if isinstance(message, dict) else {}
