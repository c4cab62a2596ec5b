"""The providers' own schemas, as a strict client checks an answer against them.

OpenAI's: the components of the official OpenAPI spec vendored under ``tests/data/openapi/``
(see its README), validated with ``openapi-schema-validator``'s OpenAPI 3.1 dialect; a
Responses stream event is checked against the one schema its ``type`` names, so an event the
spec does not know is a violation too. Anthropic's: the ``anthropic`` SDK's pydantic models
(``Message``, ``RawMessageStreamEvent``, ``ErrorResponse``), strictly, and its stream
accumulator. Google's (the Gemini wire): the ``google-genai`` SDK's pydantic types
(``GenerateContentResponse``, ``CountTokensResponse``), strictly, then read as the SDK reads them
(its converter, its SSE reader, its chat history's rule); Google's error body against the JSON
schema in ``tests/data/google/`` (the SDK has no type for it; see its README). Ollama's (its API as a
client wire): the ``ollama`` Python client's pydantic types, strictly, and what Ollama's own Go client
reads besides (``created_at`` as RFC 3339, counts and durations whole numbers); its error is
``{"error": "<message>"}`` and nothing else. A violation is one line: where, what the schema says,
what was sent.
"""

from __future__ import annotations

import functools
import warnings
from datetime import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pydantic
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from openapi_schema_validator import OAS31Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC = Path(__file__).parent.parent / "data" / "openapi" / "openai-components.json"
SPEC_URI = "urn:openai-openapi"
GOOGLE_ERROR = Path(__file__).parent.parent / "data" / "google" / "error.schema.json"


@dataclass(frozen=True, slots=True)
class Violation:
    """One place an answer breaks its schema: ``schema`` (the component or model), ``at`` (the JSON path
    in the answer), ``rule`` (the schema keyword, or pydantic's error type), ``detail``, and ``found``
    (the value there, as JSON). ``nullable``: the schema there says ``nullable: true``, OpenAPI 3.0's
    keyword that 3.1 (the spec's dialect) no longer reads."""

    schema: str
    at: str
    rule: str
    detail: str
    found: str = ""
    nullable: bool = False

    def __str__(self) -> str:
        return f"{self.schema} at {self.at or '/'}: {self.rule}: {self.detail}"


@functools.cache
def _spec() -> dict[str, Any]:
    return orjson.loads(SPEC.read_bytes())


@functools.cache
def _registry() -> Registry:
    return Registry().with_resource(SPEC_URI, Resource.from_contents(_spec(), default_specification=DRAFT202012))


@functools.cache
def _validator(component: str) -> Any:
    if component not in _spec()["components"]["schemas"]:
        raise KeyError(f"{component} is not among the vendored components (tests/data/openapi/vendor.py ROOTS)")
    return OAS31Validator({"$ref": f"{SPEC_URI}#/components/schemas/{component}"}, registry=_registry())


def openai_violations(component: str, instance: Any) -> list[Violation]:
    """Every way ``instance`` breaks the spec's ``component``. In a union (``anyOf``/``oneOf``) the branch
    meant is the one whose ``type`` the instance has (else the one with the fewest errors), and its errors
    are what is reported, not "is not valid under any of the given schemas"."""
    return [_violation(component, error) for error in _leaf_errors(_validator(component).iter_errors(instance))]


def _leaf_errors(errors: Iterable[ValidationError]) -> list[ValidationError]:
    out: list[ValidationError] = []
    for error in errors:
        if error.validator in ("anyOf", "oneOf") and error.context:
            out += _leaf_errors(_meant_branch(error.context))
        else:
            out.append(error)
    return out


def _meant_branch(context: list[ValidationError]) -> list[ValidationError]:
    branches: dict[int, list[ValidationError]] = {}
    for error in context:
        branches.setdefault(int(error.relative_schema_path[0]), []).append(error)
    def wrong_type(errors: list[ValidationError]) -> bool:
        return any(list(e.relative_path) in (["type"], []) and e.validator in ("enum", "const", "type") for e in errors)
    return min(branches.values(), key=lambda errors: (wrong_type(errors), len(errors)))


def _violation(component: str, error: ValidationError) -> Violation:
    at = "/" + "/".join(str(p) for p in error.absolute_path)
    nullable = isinstance(error.schema, dict) and error.schema.get("nullable") is True
    found = _json(error.instance)
    return Violation(component, at, str(error.validator), error.message[:300], found, nullable)


@functools.cache
def stream_event_schemas() -> dict[str, str]:
    """Each Responses stream event's ``type`` → the component that describes it (the branches of
    ``ResponseStreamEvent``)."""
    schemas = _spec()["components"]["schemas"]
    out: dict[str, str] = {}
    for branch in schemas["ResponseStreamEvent"]["anyOf"]:
        name = branch["$ref"].rsplit("/", 1)[1]
        type_schema = schemas[name].get("properties", {}).get("type", {})
        for value in type_schema.get("enum", [type_schema.get("const")]):
            if isinstance(value, str):
                out[value] = name
    return out


def responses_event_violations(event: Any) -> list[Violation]:
    """A Responses stream event against the schema its ``type`` names (unknown types are violations)."""
    kind = event.get("type") if isinstance(event, dict) else None
    component = stream_event_schemas().get(kind) if isinstance(kind, str) else None
    if component is None:
        return [Violation("ResponseStreamEvent", "/type", "enum", f"{kind!r} is no event type the spec knows")]
    return openai_violations(component, event)


def anthropic_violations(model: Any, raw: bytes, name: str | None = None) -> list[Violation]:
    """``raw`` (one JSON body or event) against an ``anthropic`` SDK type, strictly: no coercion of a
    string into a number, every required field present, every literal one of its values. The SDK's
    unions are told apart by their ``type`` (as the SDK does), so what is reported is the meant
    member's errors, or that no member has that ``type``. ``name``: the type's, for a type alias."""
    name = name or getattr(model, "__name__", repr(model))
    try:
        pydantic.TypeAdapter(model).validate_json(raw, strict=True)
    except pydantic.ValidationError as exc:
        return [Violation(name, at, rule, detail, found) for at, rule, detail, found in _meant_members(exc.errors())]
    return []


def _is_member(part: Any) -> bool:
    """A union member's name in a pydantic error location (the SDK's classes are CamelCase, its fields snake_case)."""
    return isinstance(part, str) and part[:1].isupper()


def _meant_members(errors: list[Any]) -> list[tuple[str, str, str, str]]:
    """The errors of the union members an answer meant, by its ``type``; a union no member of which
    takes that ``type`` is one error."""
    wrong_type = {e["loc"][:-1] for e in errors if e["type"] == "literal_error" and e["loc"][-1:] == ("type",) and _is_member(e["loc"][-2:-1][0] if len(e["loc"]) > 1 else None)}
    members: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
    for e in errors:
        for i, part in enumerate(e["loc"]):
            if _is_member(part):
                members.setdefault(e["loc"][:i], set()).add(e["loc"][: i + 1])
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for e in errors:
        branches = [e["loc"][: i + 1] for i, part in enumerate(e["loc"]) if _is_member(part)]
        if any(b in wrong_type and members[b[:-1]] - wrong_type for b in branches):
            continue  # a member of another type, while one of this type exists
        unknown = next((b for b in branches if b in wrong_type), None)
        if unknown is not None:  # no member takes this type
            at = _path(unknown[:-1]).rstrip("/") + "/type"
            out[(at, "union_tag_invalid")] = (f"no member of the union has this type (got {_json(e.get('input'))})", _json(e.get("input")))
            continue
        out[(_path(e["loc"]), e["type"])] = (f"{e['msg']} (got {_json(e.get('input'))})", _json(e.get("input")))
    return [(at, rule, detail, found) for (at, rule), (detail, found) in out.items()]


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()[:120]


def _path(loc: tuple[Any, ...]) -> str:
    return "/" + "/".join(str(part) for part in loc if not _is_member(part))


def accumulated_message(events: Iterable[bytes]) -> Any:
    """The message the SDK's own stream accumulator makes of a stream's event payloads (it raises on an
    event out of order, a block delta before its block, tool input that is not JSON)."""
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent

    adapter = pydantic.TypeAdapter(RawMessageStreamEvent)
    snapshot = None
    json_bufs: dict[int, bytes] = {}
    for raw in events:
        snapshot = accumulate_event(event=adapter.validate_json(raw), current_snapshot=snapshot, json_bufs=json_bufs)
    return snapshot


# --- Google's: the google-genai SDK's types, and Google's JSON error -------------------------------

# Fields of the SDK's response types that the SDK fills in itself and no Gemini API answer has.
SDK_SIDE_FIELDS = frozenset({"sdkHttpResponse", "automaticFunctionCallingHistory", "parsed"})


def gemini_violations(model: Any, raw: bytes) -> list[Violation]:
    """``raw`` (one JSON body or chunk) against a ``google-genai`` type, strictly, then as the SDK reads it.

    Strictly: the SDK's models already forbid unknown fields (``extra="forbid"``); on top of that no
    coercion (``strict``: no ``"2"`` for 2), field names only in the wire's camelCase (``by_name=False``:
    the SDK would also take ``finish_reason``, which no Gemini API answer has and Gemini CLI, in
    JavaScript, does not read), an enum value the SDK does not know is a violation (its enums take
    any string with a warning), and so is a field the SDK fills in itself (:data:`SDK_SIDE_FIELDS`).
    As the SDK reads it: its converter for the Gemini API (``…_from_mldev``) and ``_from_response``
    must give the same object, so that a field the type has but the reader drops (``finishMessage``,
    Vertex's ``createTime``) is a violation too: the SDK's user never sees it.
    """
    name = getattr(model, "__name__", repr(model))
    out: list[Violation] = []
    strict = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            strict = pydantic.TypeAdapter(model).validate_json(raw, strict=True, by_alias=True, by_name=False)
        except pydantic.ValidationError as exc:
            out += [Violation(name, _path(e["loc"]), e["type"], f"{e['msg']} (got {_json(e.get('input'))})", _json(e.get("input"))) for e in exc.errors()]
        body = orjson.loads(raw)
        reader = _sdk_readers().get(name)
        read = model._from_response(response=reader(body), kwargs={}) if strict is not None and reader is not None else None
    said = dict.fromkeys(str(w.message) for w in caught)  # each once, not once per reading
    out += [Violation(name, "/", "enum" if "is not a valid" in message else "warning", message) for message in said]
    out += [Violation(name, f"/{key}", "sdk_side", "a field the SDK fills in itself, never in an answer") for key in sorted(SDK_SIDE_FIELDS & set(body))]
    if strict is not None and read is not None:
        out += [Violation(name, at, "dropped_by_sdk", "the SDK's reader for the Gemini API drops it") for at in _missing(strict.model_dump(exclude_none=True), read.model_dump(exclude_none=True))]
    return out


@functools.cache
def _sdk_readers() -> dict[str, Any]:
    from google.genai import models

    return {
        "GenerateContentResponse": models._GenerateContentResponse_from_mldev,
        "CountTokensResponse": models._CountTokensResponse_from_mldev,
    }


def _missing(whole: Any, read: Any, at: str = "") -> list[str]:
    """Where ``read`` lacks (or differs from) what ``whole`` has."""
    if isinstance(whole, dict) and isinstance(read, dict):
        return [p for key, value in whole.items() for p in (_missing(value, read[key], f"{at}/{key}") if key in read else [f"{at}/{key}"])]
    if isinstance(whole, list) and isinstance(read, list) and len(whole) == len(read):
        return [p for n, (a, b) in enumerate(zip(whole, read)) for p in _missing(a, b, f"{at}/{n}")]
    return [] if whole == read else [at or "/"]


def sdk_stream_chunks(raw: bytes) -> list[Any]:
    """A stream as the SDK reads one: its own SSE reader (``HttpResponse.segments``), then each chunk
    through its Gemini API converter into a ``GenerateContentResponse`` (``generate_content_stream``'s
    path). An ``{"error"}`` chunk comes back as the dict it is (the SDK raises ``APIError`` on it)."""
    import httpx2
    from google.genai._api_client import HttpResponse

    chunks = HttpResponse({}, httpx2.Response(200, content=raw)).segments()
    return [chunk if isinstance(chunk, dict) and "error" in chunk else sdk_response(chunk) for chunk in chunks]


def sdk_response(answer: dict[str, Any]) -> Any:
    """One parsed answer or chunk as the SDK makes a ``GenerateContentResponse`` of it."""
    from google.genai import types

    return types.GenerateContentResponse._from_response(response=_sdk_readers()["GenerateContentResponse"](answer), kwargs={})


def chat_history_violations(responses: list[Any]) -> list[Violation]:
    """The SDK's ``Chat`` keeps a model turn in its history only when every response (or chunk) has a
    candidate whose content has parts, none of them empty (``chats._validate_response``), and a finish
    reason came: else the next ``send_message`` sends the history without the model's answer."""
    from google.genai.chats import _validate_response

    out = [Violation("Chat history", f"/{n}", "invalid_turn", "no candidate content, no parts, or an empty part: the SDK's chat drops the turn")
           for n, response in enumerate(responses) if not _validate_response(response)]
    if not any(r.candidates and r.candidates[0].finish_reason for r in responses):
        out.append(Violation("Chat history", "/", "no_finish_reason", "no finishReason: the SDK's chat drops the turn"))
    return out


@functools.cache
def _google_error_validator() -> Draft202012Validator:
    return Draft202012Validator(orjson.loads(GOOGLE_ERROR.read_bytes()))


def google_error_violations(instance: Any, status: int | None = None) -> list[Violation]:
    """A Gemini-wire error body against Google's JSON error (``tests/data/google/error.schema.json``);
    with ``status``, its ``code`` must be that HTTP status, as Google's is."""
    out = [_violation("GoogleError", error) for error in _leaf_errors(_google_error_validator().iter_errors(instance))]
    code = instance.get("error", {}).get("code") if isinstance(instance, dict) and isinstance(instance.get("error"), dict) else None
    if status is not None and code != status:
        out.append(Violation("GoogleError", "/error/code", "http_status", f"{code!r} is not the answer's HTTP status {status}", _json(code)))
    return out


OLLAMA_WHOLE_NUMBERS = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration")


def ollama_violations(model: Any, raw: bytes) -> list[Violation]:
    """One Ollama answer or line (``raw``) against the ``ollama`` client's type ``model`` (``ChatResponse``,
    ``GenerateResponse``, ``ListResponse``, ``ShowResponse``), strictly (no ``"2"`` for 2), and as Ollama's Go
    client reads it: ``created_at`` (and ``modified_at``) as RFC 3339, the counts and durations whole numbers."""
    name = getattr(model, "__name__", repr(model))
    out: list[Violation] = []
    try:
        model.model_validate_json(raw, strict=True)
    except pydantic.ValidationError as exc:
        out += [Violation(name, _path(e["loc"]), e["type"], f"{e['msg']} (got {_json(e.get('input'))})", _json(e.get("input"))) for e in exc.errors()]
    body = orjson.loads(raw)
    if not isinstance(body, dict):
        return out
    for key in ("created_at", "modified_at"):
        if key in body:
            try:
                datetime.fromisoformat(body[key])
            except (TypeError, ValueError):
                out.append(Violation(name, f"/{key}", "rfc3339", "not an RFC 3339 time, which Go's time.Time reads", _json(body[key])))
    for key in OLLAMA_WHOLE_NUMBERS:
        if key in body and not (type(body[key]) is int and body[key] >= 0):
            out.append(Violation(name, f"/{key}", "whole_number", "a count or a duration in nanoseconds: a whole number", _json(body[key])))
    return out


def ollama_error_violations(instance: Any) -> list[Violation]:
    """An Ollama error body: ``{"error": "<message>"}``, which its clients raise with the status."""
    if isinstance(instance, dict) and set(instance) == {"error"} and isinstance(instance["error"], str) and instance["error"]:
        return []
    return [Violation("OllamaError", "/", "shape", 'not {"error": "<message>"}', _json(instance)[:200])]
