"""Validation of a ``generateContent`` / ``streamGenerateContent`` body: the minimal shape, nothing more. Pure.

The model and whether to stream come from the path (``/v1beta/models/{model}:{action}``), the
stream's framing from ``?alt=sse``; the body carries neither. What the proxy reads is checked
and a 400 names the field, as Google's errors do; every other field and part kind (safety
settings, ``cachedContent``, ``executableCode``, ``videoMetadata``, new fields) passes through for
the provider to judge (WHAT-USERS-HIT #8, #10).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from router.core.errors import InvalidRequest
from router.core.frozen import frozen
from router.core.json_body import nests_within
from router.core.resent_prefix import Resumed
from router.wire.gemini.layout import GeminiLayout, add_result, neutral_parts, place, start
from router.wire.gemini.parts import (
    CONTENTS,
    DECLARATIONS,
    FUNCTION_CALL,
    FUNCTION_RESPONSE,
    GENERATION,
    INLINE_DATA,
    MAX_OUTPUT,
    SYSTEM,
    THINKING,
    TOOL_CONFIG,
    TOOLS,
    field,
    is_image_part,
)

# The path's actions that go through the chain, and whether each streams.
ACTIONS = {"generateContent": False, "streamGenerateContent": True}
ROLES = ("user", "model", "function")  # "function": the older API's role for function responses


@frozen
class GeminiRequest:
    """What the proxy reads of a valid body (the body itself stays the client's) and of its path:
    ``sse``: the stream is framed as server-sent events (``?alt=sse``), else as one JSON array."""

    model: str | None
    stream: bool
    sse: bool
    contents: list[dict[str, Any]]
    system: Any
    tools: list[dict[str, Any]] | None
    has_images: bool = False
    tool_history: bool = False
    layout: GeminiLayout | None = None  # the units as the fused check placed them (None: the view places them)
    reused_units: int = 0  # the leading units taken from the body this one resumed (its very objects)
    words: list[int] | None = None  # the user contents that may hold words (GeminiFacts), when the check found them


def validate_gemini_body(body: Any, model: str | None, action: str | None, query: Mapping[str, str] | None = None) -> GeminiRequest:
    """The minimal shape of a Gemini request; ``model`` and ``action`` from its path."""
    _check_action(action)
    return _request(_validated(body, None), model, action, query)


class GeminiBody(NamedTuple):
    """What a valid body says (its path says the rest: :func:`with_target`)."""

    contents: list[dict[str, Any]]
    system: Any
    tools: list[dict[str, Any]] | None
    has_images: bool
    tool_history: bool
    layout: GeminiLayout | None = None
    facts: GeminiFacts | None = None  # what a body that resends these contents resumes from
    reused_units: int = 0


@dataclass(frozen=True, slots=True)
class GeminiFacts:
    """A checked body's layout, and after each content what was placed and seen so far: ``(units,
    results, turns, unsigned, turn_start, has_images, tool_history)``, so a body that resends its
    first contents resumes after them (:func:`check_gemini_body`). Read only: a resumed check copies."""

    layout: GeminiLayout
    marks: list[tuple[int, int, int, int, int, bool, bool]]
    words: list[int]  # the user contents that may hold words (not a lone function response), ascending: the turn text's


class CheckedGemini(NamedTuple):
    """A Gemini body validated on the way to its depth walk (:func:`check_gemini_body`), as
    :class:`~router.wire.openai_chat.validation.CheckedChat` is for chat: ``body`` None when it is
    invalid (``parse`` says why, after the depth walk); ``walk``, the body or a shallow copy whose
    ``contents`` holds only those not proven to nest within the limit with no float."""

    body: GeminiBody | None
    walk: Any

    @property
    def facts(self) -> GeminiFacts | None:
        return self.body.facts if self.body is not None else None


_CONTENT_DEPTH = 3  # body 1, contents 2, a content 3
_PROVEN_DEPTH = 8  # below it nothing is proven (the limit is never set this low: 8 at least)


def check_gemini_body(body: Any, max_depth: int, resumed: Resumed | None = None) -> CheckedGemini:
    """Validate ``body`` (all of it the path does not say) and, in the same pass over its contents,
    prove the usual ones shallow and float-free (the depth walk then skips them). ``resumed``: the
    body's first contents are an earlier accepted body's very objects (:mod:`router.core.resent_prefix`),
    checked, placed and walked then: the check starts after them, from what it left."""
    unproven: list[Any] = []
    facts = resumed.parent.facts if resumed is not None else None
    since = None  # the layout's first unit is the system instruction: resumed only when it is the same
    if type(facts) is GeminiFacts and resumed is not None and resumed.count <= len(facts.marks) and field(body, SYSTEM) == field(resumed.parent.body, SYSTEM):
        since = (facts, resumed.count)
    try:
        checked = _validated(body, (unproven, max_depth - _CONTENT_DEPTH + 1), since)
    except InvalidRequest:
        return CheckedGemini(None, body)
    walk = body
    if max_depth >= _PROVEN_DEPTH and len(unproven) != len(checked.contents):
        walk = dict(body)
        walk[CONTENTS[0] if CONTENTS[0] in body else CONTENTS[1]] = unproven
    return CheckedGemini(checked, walk)


def with_target(checked: GeminiBody, model: str | None, action: str | None, query: Mapping[str, str] | None = None) -> GeminiRequest:
    """The request of a body :func:`check_gemini_body` found valid, with what its path says
    (:class:`InvalidRequest` for an action the proxy does not serve)."""
    _check_action(action)
    return _request(checked, model, action, query)


def _check_action(action: str | None) -> None:
    if action not in ACTIONS:
        raise InvalidRequest(f"the action must be one of {', '.join(ACTIONS)} (got {str(action)[:40]!r})", "action")


def _request(checked: GeminiBody, model: str | None, action: Any, query: Mapping[str, str] | None) -> GeminiRequest:
    stream = ACTIONS[action]
    return GeminiRequest(
        model=model or None,
        stream=stream,
        sse=stream and (query or {}).get("alt") == "sse",
        contents=checked.contents,
        system=checked.system,
        tools=checked.tools,
        has_images=checked.has_images,
        tool_history=checked.tool_history,
        layout=checked.layout,
        reused_units=checked.reused_units,
        words=checked.facts.words if checked.facts is not None else None,
    )


def _validated(body: Any, prove: tuple[list[Any], int] | None, since: tuple[GeminiFacts, int] | None = None) -> GeminiBody:
    """The body's own checks; ``prove``: the list the contents not proven shallow go to, and the
    levels a content may nest (itself the first) within the limit; ``since``: the facts of the body
    whose first ``count`` contents this one's are, checked and placed then (with ``prove`` only)."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    contents = field(body, CONTENTS)
    if not isinstance(contents, list) or not contents:
        raise InvalidRequest("contents: a non-empty list of Content objects is required", "contents")
    has_images = tool_history = False
    system = field(body, SYSTEM)
    marks: list[tuple[int, int, int, int, int, bool, bool]] = []
    words: list[int] = []
    first = 0
    if prove is None:
        layout = None
        for c, content in enumerate(contents):
            images, history = _check_content(content, f"contents[{c}]")
            has_images, tool_history = has_images or images, tool_history or history
    else:
        unproven, levels = prove
        if since is None:
            layout = start(system)
        else:
            old, first = since[0].layout, since[1]
            marks = since[0].marks[:first]
            words = since[0].words[: bisect_left(since[0].words, first)]
            units, results, turns, unsigned, turn_start, has_images, tool_history = marks[-1]
            layout = GeminiLayout(old.units[:units], old.results[:results], old.where[:results], old.fields[:results], old.turns[:turns], old.unsigned[:unsigned], turn_start)
        for c in range(first, len(contents)):
            content = contents[c]
            usual = _usual_content(content, levels, layout, c)
            if usual is None:
                images, history = _check_content(content, f"contents[{c}]")
                place(layout, c, content)
                unproven.append(content)
                has_images, tool_history = has_images or images, tool_history or history
            else:
                history, proven = usual
                if not proven:
                    unproven.append(content)
                tool_history = tool_history or history
            marks.append((len(layout.units), len(layout.results), len(layout.turns), len(layout.unsigned), layout.turn_start, has_images, tool_history))
            if content.get("role") != "model":  # valid now; a lone function response says no words (Gemini CLI's tool turn)
                parts = content["parts"]
                if not (len(parts) == 1 and len(parts[0]) == 1 and ("functionResponse" in parts[0] or "function_response" in parts[0])):
                    words.append(c)
    if system is not None and not isinstance(system, str):
        if not isinstance(system, dict):
            raise InvalidRequest("systemInstruction: must be a Content object", "systemInstruction")
        _check_parts(system.get("parts"), "systemInstruction.parts", allow_empty=True)
    tools = field(body, TOOLS)
    if tools is not None:
        if not isinstance(tools, list):
            raise InvalidRequest("tools: must be a list of Tool objects", "tools")
        for t, tool in enumerate(tools):
            _check_tool(tool, f"tools[{t}]")
    for name in (TOOL_CONFIG, GENERATION):
        value = field(body, name)
        if value is not None and not isinstance(value, dict):
            raise InvalidRequest(f"{name[0]}: must be an object", name[0])
    generation = field(body, GENERATION)
    limit = field(generation, MAX_OUTPUT)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise InvalidRequest("generationConfig.maxOutputTokens: must be a positive integer", "generationConfig.maxOutputTokens")
    thinking = field(generation, THINKING)
    if thinking is not None and not isinstance(thinking, dict):
        raise InvalidRequest("generationConfig.thinkingConfig: must be an object", "generationConfig.thinkingConfig")
    facts = GeminiFacts(layout, marks, words) if layout is not None else None
    return GeminiBody(contents, system, tools or None, has_images, tool_history, layout, facts, marks[first - 1][0] if first else 0)


_USUAL_KEYS = frozenset({"text", "thought", "thoughtSignature", "functionCall", "functionResponse"})


def _usual_content(content: Any, levels: int, layout: GeminiLayout, c: int) -> tuple[bool, bool] | None:
    """For a content of the usual parts, all valid and none an image (text, thought, a call, a
    response without parts, in their camelCase spelling): placed in ``layout`` as
    :func:`~router.wire.gemini.layout.place` places it, and whether it holds a call or a response,
    and whether it nests within ``levels`` levels (itself the first) with no float — proven on the
    way: the keys checked here are counted, only a call's args and a response's response are walked;
    None for anything else (the long path, :func:`_check_content`, judges it; nothing is placed)."""
    if type(content) is not dict:
        return None
    role = content.get("role")
    parts = content.get("parts")
    if (role is not None and role not in ROLES) or type(parts) is not list or not parts:
        return None
    model = role == "model"
    # the content holds a role (a string or null) and its parts, nothing else; a part is 3 levels down
    proven = len(content) == 1 + ("role" in content)
    if not model and len(parts) == 1:  # Gemini CLI's tool turn: one function response, nothing else
        part = parts[0]
        response = part.get("functionResponse") if type(part) is dict and len(part) == 1 else None
        if type(response) is dict and type(response.get("name")) is str and response.get("parts") is None:
            inner = response.get("response")
            if inner is None or type(inner) is dict:
                add_result(layout, c, 0, response)
                return True, proven and _response_within(response, inner, levels)
    history = False
    neutral: list[Any] = []  # a model content's parts in the estimator's terms (layout.neutral_parts)
    responses: list[tuple[int, dict[str, Any]]] | None = None  # a user content's: (part index, response)
    first_call = -1
    signed = True
    for p, part in enumerate(parts):
        if type(part) is not dict or not _USUAL_KEYS.issuperset(part):
            return None
        if "text" in part:
            text = part["text"]
            if type(text) is not str:
                return None
            neutral.append({"type": "text", "text": text})
            if len(part) == 1:  # a text part: nothing below it
                continue
            neutral.append({k: v for k, v in part.items() if k != "text"})  # the thought flag, a signature
        else:
            neutral.append(part)
        call = part.get("functionCall")
        if call is not None:
            args = call.get("args") if type(call) is dict else None
            if type(call) is not dict or type(call.get("name")) is not str or (args is not None and type(args) is not dict):
                return None
            history = True
            if first_call < 0:
                first_call = p
                signature = part.get("thoughtSignature")
                signed = type(signature) is str and bool(signature)
            # its name, args and string id counted (args alone walked), else the call walked
            if proven and not (
                levels > 4 and len(call) == 1 + ("args" in call) + (type(call.get("id")) is str) and (args is None or nests_within(args, levels - 4))
            ):
                proven = nests_within(call, levels - 3)
        response = part.get("functionResponse")
        if response is not None:
            inner = response.get("response") if type(response) is dict else None
            if type(response) is not dict or type(response.get("name")) is not str or response.get("parts") is not None:
                return None
            if inner is not None and type(inner) is not dict:
                return None
            history = True
            if not model:
                if responses is None:
                    responses = [(p, response)]
                else:
                    responses.append((p, response))
            proven = proven and _response_within(response, inner, levels)
        if proven and (("thought" in part and type(part["thought"]) is not bool) or ("thoughtSignature" in part and type(part["thoughtSignature"]) is not str)):
            proven = False
    units = layout.units
    if model:
        layout.turns.append(len(units))
        units.append({"role": "assistant", "content": neutral})
        if first_call >= 0 and not signed:
            layout.unsigned.append((c, first_call))
    elif responses is None:
        layout.turn_start = c
        units.append({"role": "user", "content": neutral})
    else:
        for p, response in responses:
            add_result(layout, c, p, response)
        if len(responses) != len(parts):  # the other parts: one more unit
            layout.turn_start = c
            kept = {p for p, _ in responses}
            units.append({"role": "user", "content": neutral_parts([part for p, part in enumerate(parts) if p not in kept])})
    return history, proven


def _response_within(response: dict[str, Any], inner: Any, levels: int) -> bool:
    """A valid function response (its ``response`` is ``inner``) of a part 3 levels down nests within
    ``levels`` with no float: as a call, its name, response and string id counted (the response alone
    walked), else the whole of it walked."""
    if levels > 4 and len(response) == 1 + ("response" in response) + (type(response.get("id")) is str) and (inner is None or nests_within(inner, levels - 4)):
        return True
    return nests_within(response, levels - 3)


def _check_content(content: Any, where: str) -> tuple[bool, bool]:
    """Raises for a malformed content; whether it holds an image, and a function call or response."""
    if not isinstance(content, dict):
        raise InvalidRequest(f"{where}: must be a Content object", where)
    role = content.get("role")
    if role is not None and role not in ROLES:
        raise InvalidRequest(f"{where}.role: must be one of {', '.join(ROLES)} (got {str(role)[:40]!r})", f"{where}.role")
    return _check_parts(content.get("parts"), f"{where}.parts", allow_empty=False)


def _check_parts(parts: Any, where: str, allow_empty: bool) -> tuple[bool, bool]:
    if not isinstance(parts, list) or (not parts and not allow_empty):
        raise InvalidRequest(f"{where}: must be a non-empty list of Part objects", where)
    images = history = False
    for p, part in enumerate(parts):
        at = f"{where}[{p}]"
        if not isinstance(part, dict):
            raise InvalidRequest(f"{at}: must be a Part object", at)
        if "text" in part and not isinstance(part["text"], str):
            raise InvalidRequest(f"{at}.text: must be a string", f"{at}.text")
        if _check_named(field(part, FUNCTION_CALL), f"{at}.functionCall", "args") is not None:
            history = True
        response = _check_named(field(part, FUNCTION_RESPONSE), f"{at}.functionResponse", "response")
        if response is not None:
            if response.get("parts") is not None:
                inner_images, _ = _check_parts(response["parts"], f"{at}.functionResponse.parts", allow_empty=True)
                images = images or inner_images
            history = True
        data = field(part, INLINE_DATA)
        if data is not None and (not isinstance(data, dict) or not isinstance(data.get("data"), str)):
            raise InvalidRequest(f"{at}.inlineData: needs a string 'data' (base64)", f"{at}.inlineData")
        images = images or is_image_part(part)
    return images, history


def _check_named(value: Any, where: str, payload: str) -> dict[str, Any] | None:
    """A functionCall or functionResponse (None: the part has none): an object with a string ``name``,
    its ``payload`` (args, response) an object when present."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise InvalidRequest(f"{where}: needs a string 'name'", where)
    if value.get(payload) is not None and not isinstance(value[payload], dict):
        raise InvalidRequest(f"{where}.{payload}: must be an object", f"{where}.{payload}")
    return value


def _check_tool(tool: Any, where: str) -> None:
    if not isinstance(tool, dict):
        raise InvalidRequest(f"{where}: must be a Tool object", where)
    declarations = field(tool, DECLARATIONS)
    if declarations is None:
        return  # googleSearch, codeExecution, urlContext …: passed on for the provider to judge
    if not isinstance(declarations, list):
        raise InvalidRequest(f"{where}.functionDeclarations: must be a list", f"{where}.functionDeclarations")
    for d, declaration in enumerate(declarations):
        if not isinstance(declaration, dict) or not isinstance(declaration.get("name"), str) or not declaration["name"]:
            raise InvalidRequest(f"{where}.functionDeclarations[{d}].name: must be a non-empty string", f"{where}.functionDeclarations[{d}].name")
        for key in ("parameters", "parametersJsonSchema", "parameters_json_schema"):
            if declaration.get(key) is not None and not isinstance(declaration[key], dict):
                raise InvalidRequest(f"{where}.functionDeclarations[{d}].{key}: must be an object", f"{where}.functionDeclarations[{d}].{key}")
