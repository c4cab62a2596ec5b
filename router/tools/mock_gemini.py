"""The mock upstream's Gemini API: requests read, answers built (pure).

``POST /v1beta/models/{model}:generateContent`` answers a ``GenerateContentResponse``;
``:streamGenerateContent`` streams its chunks (``data: {…}`` events with ``?alt=sse``, else one
JSON array): the text word by word, a call whole, the last chunk with ``finishReason`` and
``usageMetadata``. It follows the script the other mocks share (``mock_answers``): the shell tool
(Gemini CLI's ``run_shell_command``), else a tool that lists files (``list_directory``), else the first
tool is called with the user turn's next command; once every call has its ``functionResponse``
the answer quotes it; a request asking for JSON (``responseMimeType``, with or without a schema —
Gemini CLI's model-router call) gets an instance of its schema (upper-case OpenAPI types read as
JSON Schema's); ``includeThoughts`` gets a thought part first.

Thought signatures: every call the mock makes carries one, sealed over the call's name and
arguments (``mock_answers.seal``), and so does its text answer's last part. Like Gemini 3 it refuses
(400 ``INVALID_ARGUMENT``, Google's wording) a request whose current turn — the contents since the
last user content that is not only function responses — has a step whose first call lacks a
signature; stricter than Google, it refuses any signature in the history that is neither one it
made nor Google's placeholder (``skip_thought_signature_validator``), so an altered one is caught
wherever it is. It also refuses a step whose function responses do not match its calls in number.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import orjson

from router.tools.mock_answers import ONE_LISTING, FunctionTool, MockWire, ScriptedAnswer, call_tool, estimate_tokens, example_of, next_command, reasoning_about, retrieve_call, scripted_answer, seal, words
from router.wire.gemini.errors import error_payload
from router.wire.gemini.parts import (
    CONTENTS,
    DECLARATIONS,
    GENERATION,
    RESPONSE_JSON_SCHEMA,
    RESPONSE_MIME,
    RESPONSE_SCHEMA,
    SKIP_SIGNATURE,
    SYSTEM,
    THINKING,
    TOOLS,
    current_turn_start,
    field,
    first_call_at,
    function_call,
    function_response,
    is_model,
    is_thought,
    parts_of,
    signature_of,
    text_of,
)
from router.wire.gemini.layout import response_text



def error_body(status: int, message: str) -> dict[str, Any]:
    return error_payload(status, message)


def call_signature(call: dict[str, Any]) -> str:
    """The signature the mock gives a call: over its name and arguments (an id Gemini CLI adds later is not its)."""
    return seal("call:" + str(call.get("name", "")) + ":" + orjson.dumps(call.get("args") or {}, option=orjson.OPT_SORT_KEYS).decode())


def text_signature(text: str) -> str:
    return seal("text:" + text)


def signature_bytes(signature: str) -> bytes | None:
    """A signature's bytes: Google's JSON takes base64 in either alphabet (the google-genai SDK sends
    back the URL-safe one), so signatures are compared as bytes. None when it is no base64."""
    try:
        return base64.b64decode(signature.replace("-", "+").replace("_", "/") + "=" * (-len(signature) % 4), validate=True)
    except ValueError:
        return None


def _valid_signature(part: dict[str, Any]) -> bool:
    signature = signature_of(part)
    if signature is None or signature == SKIP_SIGNATURE:
        return True
    call = function_call(part)
    text = part.get("text")
    expected = call_signature(call) if call is not None else text_signature(text) if isinstance(text, str) else None
    return expected is not None and signature_bytes(signature) == signature_bytes(expected)


def request_error(body: dict[str, Any]) -> str | None:
    """What Gemini 3 would refuse with a 400 among what the mock checks (see the module doc)."""
    contents = field(body, CONTENTS)
    if not isinstance(contents, list) or not contents or not all(isinstance(c, dict) for c in contents):
        return "* GenerateContentRequest.contents: contents is not specified"
    for c, content in enumerate(contents):
        if not parts_of(content):
            return f"* GenerateContentRequest.contents[{c}].parts: contents.parts must not be empty."
        for p, part in enumerate(parts_of(content)):
            if is_model(content) and not _valid_signature(part):
                return f"Corrupted thought signature in contents[{c}].parts[{p}]."
    start = current_turn_start(contents)
    for c in range(start, len(contents)):
        content = contents[c]
        if not is_model(content):
            continue
        parts = parts_of(content)
        first = first_call_at(parts)
        if first is not None and signature_of(parts[first]) is None:
            name = function_call(parts[first]).get("name")  # type: ignore[union-attr]
            return (
                f"Function call `{name}` in the {c + 1}. content block is missing a `thought_signature`. "
                "Learn more: https://ai.google.dev/gemini-api/docs/thought-signatures"
            )
    for c, content in enumerate(contents[:-1]):
        calls = sum(function_call(p) is not None for p in parts_of(content)) if is_model(content) else 0
        answered = sum(function_response(p) is not None for p in parts_of(contents[c + 1]))
        if calls and answered != calls:
            return (
                "Please ensure that the number of function response parts is equal to the number of function call parts "
                f"of the function call turn (contents[{c}]: {calls} calls, contents[{c + 1}]: {answered} responses)."
            )
    return None


def lowercase_types(schema: Any) -> Any:
    """A Gemini (OpenAPI) schema's upper-case types as JSON Schema's, for :func:`example_of`."""
    if isinstance(schema, list):
        return [lowercase_types(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: (v.lower() if k == "type" and isinstance(v, str) else lowercase_types(v)) for k, v in schema.items()}


def _tools(body: dict[str, Any]) -> list[FunctionTool]:
    out = []
    for tool in field(body, TOOLS) or []:
        for declaration in field(tool, DECLARATIONS) or [] if isinstance(tool, dict) else []:
            if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                schema = declaration.get("parametersJsonSchema", declaration.get("parameters_json_schema", declaration.get("parameters")))
                out.append(FunctionTool(declaration["name"], lowercase_types(schema) if isinstance(schema, dict) else {}))
    return out


def answer(body: dict[str, Any], text: str, commands: tuple[str, ...] = ONE_LISTING) -> ScriptedAnswer:
    contents = field(body, CONTENTS) or []
    start = current_turn_start(contents)
    results = [r for content in contents[start + 1 :] for p in parts_of(content) if (r := function_response(p)) is not None]
    tools = _tools(body)
    latest = [response_text(r.get("response"))[0] for p in (parts_of(contents[-1]) if contents else ()) if (r := function_response(p)) is not None]
    retrieve = retrieve_call([t.name for t in tools], latest, f"call_mock_{len(contents)}_retrieve")
    call = retrieve or call_tool(tools, f"call_mock_{len(contents)}_0", next_command(commands, len(results)))
    generation = field(body, GENERATION)
    schema = field(generation, RESPONSE_JSON_SCHEMA) or field(generation, RESPONSE_SCHEMA)
    mime = field(generation, RESPONSE_MIME)
    otherwise = None
    if isinstance(schema, dict):
        otherwise = json.dumps(example_of(lowercase_types(schema)), separators=(",", ":"))
    elif isinstance(mime, str) and mime.startswith("application/json"):
        otherwise = '{"category": "coding_general", "tier": 2, "required_context_tokens": 4000}'
    scripted = scripted_answer(call, [response_text(r.get("response"))[0] for r in results], text, otherwise)
    thinking = field(generation, THINKING)
    if isinstance(thinking, dict) and (thinking.get("includeThoughts") or thinking.get("include_thoughts")):
        return ScriptedAnswer(scripted.text, scripted.tool_call, reasoning_about(scripted))
    return scripted


def _parts(scripted: ScriptedAnswer) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if scripted.reasoning is not None:
        parts.append({"text": scripted.reasoning, "thought": True})
    if scripted.tool_call is not None:
        call = {"id": scripted.tool_call.id, "name": scripted.tool_call.name, "args": scripted.tool_call.arguments}
        parts.append({"functionCall": call, "thoughtSignature": call_signature(call)})
    else:
        parts.append({"text": scripted.text, "thoughtSignature": text_signature(scripted.text)})
    return parts


def _usage(body: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, int]:
    prompt = estimate_tokens(field(body, SYSTEM), field(body, CONTENTS), field(body, TOOLS))
    output = estimate_tokens(parts)
    return {"promptTokenCount": prompt, "candidatesTokenCount": output, "totalTokenCount": prompt + output}


def _response(parts: list[dict[str, Any]], model: str, response_id: str, finish: str | None, usage: dict[str, int] | None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate]}
    if usage is not None:
        out["usageMetadata"] = usage
    return {**out, "modelVersion": model, "responseId": response_id}


def message(body: dict[str, Any], scripted: ScriptedAnswer) -> dict[str, Any]:
    """The whole answer; ``body`` carries the path's ``model`` beside the request's fields."""
    parts = _parts(scripted)
    model = str(body.get("model") or "mock")
    return _response(parts, model, f"mock-{len(field(body, CONTENTS) or [])}", "STOP", _usage(body, parts))


def chunks(body: dict[str, Any], scripted: ScriptedAnswer) -> list[dict[str, Any]]:
    """The streamed answer's chunks: thoughts, then the text word by word (its signature on a last empty
    part) or the call whole, the last chunk with ``finishReason`` and the whole usage."""
    whole = _parts(scripted)
    model = str(body.get("model") or "mock")
    response_id = f"mock-{len(field(body, CONTENTS) or [])}"
    usage = _usage(body, whole)
    out = [_response([p], model, response_id, None, {"promptTokenCount": usage["promptTokenCount"]}) for p in whole if is_thought(p)]
    if scripted.tool_call is not None:
        out.append(_response([whole[-1]], model, response_id, "STOP", usage))
        return out
    out += [_response([{"text": piece}], model, response_id, None, {"promptTokenCount": usage["promptTokenCount"]}) for piece in words(scripted.text)]
    out.append(_response([{"text": "", "thoughtSignature": whole[-1]["thoughtSignature"]}], model, response_id, "STOP", usage))
    return out


def events(body: dict[str, Any], scripted: ScriptedAnswer) -> list[bytes]:
    """The chunks as SSE events with ``alt=sse`` (the path's, beside the body), else as Google's JSON array."""
    encoded = [orjson.dumps(chunk) for chunk in chunks(body, scripted)]
    if body.get("alt") == "sse":
        return [b"data: " + chunk + b"\r\n\r\n" for chunk in encoded]
    return [(b"[" if n == 0 else b",\r\n") + chunk for n, chunk in enumerate(encoded)] + [b"]"]


def stream_type(body: dict[str, Any]) -> str:
    return "text/event-stream" if body.get("alt") == "sse" else "application/json"


def answer_text(answer: dict[str, Any]) -> str:
    """The text of a whole answer (tests)."""
    candidates = answer.get("candidates") or [{}]
    return "".join(t for p in parts_of(candidates[0].get("content")) if (t := text_of(p)) is not None)


def count_tokens(body: dict[str, Any]) -> dict[str, int]:
    request = body.get("generateContentRequest") if isinstance(body.get("generateContentRequest"), dict) else body
    return {"totalTokens": estimate_tokens(field(request, SYSTEM), field(request, CONTENTS), field(request, TOOLS))}


def path_facts(parts: Mapping[str, str], query: Mapping[str, str]) -> dict[str, Any]:
    """The model and the stream the path names, and ``alt`` (SSE or Google's JSON array), beside the body."""
    return {"model": parts["model"], "stream": parts["action"] == "streamGenerateContent", "alt": query.get("alt")}


WIRE = MockWire("gemini", error_body, request_error, answer, message, events, stream_type, path_facts)
