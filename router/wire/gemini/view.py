"""A Gemini request as the neutral view (:mod:`router.core.request_view`). Pure.

Units: the ``systemInstruction`` (one unit), then each content — except that a user content's
``functionResponse`` parts are each a unit of their own and its other parts one more, so a unit
holds at most one tool result. Each unit is the content in the estimator's terms (text parts as
text, images as images, every other part counted by its JSON), built once per request. An
assistant turn starts at each ``model`` content.

A tool result is a ``functionResponse``: its id is its ``id`` when Gemini gives one (Gemini 3 and
Gemini CLI do), else ``<name>@<content>.<part>``, stable as a conversation grows; its tool is its
``name``; its content, for pinch, the text of its ``response`` — the string of a response with one
string field (Gemini CLI's ``{"output": …}``, the SDKs' ``{"result": …}``), else the response's
JSON. A rewrite puts the new text back under that field (``output`` for a JSON one): nothing else
of the part changes, and no other part — function calls and their thought signatures never do.

What the stages read besides: tools (``functionDeclarations``) offered and in the history, images
(``inlineData``/``fileData`` of an image type, in function responses too), JSON output
(``responseMimeType: application/json``, a ``responseSchema`` or ``responseJsonSchema``), the output
limit (``maxOutputTokens``), thinking (``thinkingConfig``); the opening (the system instruction and
the first user content) for the fingerprint, and the turn text without Gemini CLI's
``<session_context>`` part, which is context rather than what the user asked.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

import orjson

from router.core.request_view import PlacedConversation, RequestView, Rewrites, call_arguments, clean_tool_name
from router.core.results import StaleSignatures
from router.core.turn_text import TurnText, latest_turn_text
from router.wire.gemini.parts import (
    FILE_DATA,
    FUNCTION_RESPONSE,
    INLINE_DATA,
    GEMINI,
    GENERATION,
    MAX_OUTPUT,
    RESPONSE_JSON_SCHEMA,
    RESPONSE_MIME,
    RESPONSE_SCHEMA,
    THINKING,
    THINKING_BUDGET,
    DECLARATIONS,
    INCLUDE_THOUGHTS,
    THINKING_LEVEL,
    all_text,
    field,
    function_call,
    function_response,
    is_image_part,
    is_model,
    is_session_context,
    key_of,
    parts_of,
)
from router.wire.gemini.layout import GeminiLayout, layout_of
from router.wire.gemini.signatures import HOLD_FOR_SIGNED_LOOP, loop_signed, stale_signatures
from router.wire.gemini.validation import GeminiRequest

REWRITTEN_FIELD = "output"  # where a rewrite of a response that was not one string field goes


class GeminiConversation(PlacedConversation):
    """:class:`router.core.request_view.Conversation` over a Gemini ``systemInstruction`` and ``contents``.

    Its signed reasoning is Gemini's thought signatures (:mod:`.signatures`)."""

    __slots__ = ("contents", "sse", "units", "unsigned_calls", "_where", "_fields", "_calls")
    result_key = "content"
    result_id_key = "id"

    def __init__(self, system: Any, contents: list[Any], sse: bool = True, layout: GeminiLayout | None = None) -> None:
        """``sse``: a stream is framed as server-sent events (``?alt=sse``), else as one JSON array.
        ``layout``: the units as the fused check placed them (:mod:`.layout`); else placed here.

        ``unsigned_calls``: the ``(content, part)`` place of each step's first call in Google's
        current turn that has no thought signature (Google's first call of a step must carry one;
        :func:`~router.wire.gemini.body.signed` adds the placeholder), found by the same pass."""
        self.contents = contents
        self.sse = sse
        if layout is None:
            layout = layout_of(system, contents)
        super().__init__(layout.results, layout.turns)
        self.units = layout.units
        self.unsigned_calls = layout.unsigned_calls()
        self._where = layout.where
        self._fields = layout.fields
        self._calls: dict[str, dict[str, Any]] | None = None  # first sight's: the calls by id, found when asked

    def tool_name(self, unit: int) -> str:
        return clean_tool_name(self.units[unit].get("name"))

    def tool_call(self, unit: int) -> tuple[str, str]:
        """The ``functionCall`` a response answers: the one with its ``id``; else, of the calls of its name
        in the nearest model content before it, the n-th for the n-th response of that name."""
        c, p = self._where[bisect_left(self.result_units(), unit)]
        parts = self.contents[c]["parts"]
        response = function_response(parts[p]) or {}
        name, call_id = response.get("name"), response.get("id")
        if type(call_id) is str and call_id:
            if self._calls is None:
                self._calls = {}
                for content in self.contents:
                    for part in parts_of(content) if is_model(content) else ():
                        if (call := function_call(part)) is not None and type(call.get("id")) is str:
                            self._calls.setdefault(call["id"], call)
            call = self._calls.get(call_id)
        else:
            model = next((content for content in reversed(self.contents[:c]) if is_model(content)), None)
            named = [call for part in parts_of(model) if (call := function_call(part)) is not None and call.get("name") == name]
            nth = sum(1 for part in parts[:p] if (earlier := function_response(part)) is not None and earlier.get("name") == name)
            call = named[nth] if nth < len(named) else None
        return self.tool_name(unit), call_arguments(call.get("args") if call is not None else None)

    def batch_hold(self, checks_signatures: bool) -> str | None:
        """A batch would make the signatures of the tool loop in progress stale (they would go as the
        placeholder): on a model that checks them it waits for the loop's end."""
        return HOLD_FOR_SIGNED_LOOP if checks_signatures and loop_signed(self.contents) else None

    def stale_signatures(self, first_changed: int | None, remembered: tuple[str, ...]) -> tuple[StaleSignatures | None, tuple[str, ...]]:
        if first_changed is None and not remembered:
            return None, remembered
        found = stale_signatures(self.contents, self._where[first_changed][0] if first_changed is not None else None, remembered)
        return (found if found.positions else None), found.keys

    def content_of(self, position: int) -> int:
        """The index in ``contents`` of the content holding result ``position``."""
        return self._where[position][0]

    def contents_with(self, rewrites: Rewrites) -> list[Any]:
        """The client's contents with each rewritten result's ``response`` replaced (see the module doc);
        the very same list when none is. No other part or content changes; nothing is mutated."""
        if not rewrites:
            return self.contents
        out = list(self.contents)
        for position, text in rewrites.items():
            c, p = self._where[position]
            content = out[c]
            if content is self.contents[c]:
                content = out[c] = {**content, "parts": list(content["parts"])}
            part = content["parts"][p]
            key = key_of(part, FUNCTION_RESPONSE)
            response = part[key]
            held = self._fields[position] or REWRITTEN_FIELD
            content["parts"][p] = {**part, key: {**response, "response": {held: text}}}
        return out


def turn_text(contents: list[Any], max_chars: int, words: list[int] | None = None) -> TurnText:
    """The last user words (function responses and Gemini CLI's session context are not what was asked)
    and the last model turn's calls plus the tail of its text (:func:`router.core.turn_text.latest_turn_text`).
    ``contents``: validated ones (each a Content object whose parts are Part objects), read directly;
    ``words``: the user contents that may hold words, when the check found them."""
    users = (contents[i] for i in reversed(words)) if words is not None else None
    return latest_turn_text(lambda: (("assistant" if c.get("role") == "model" else "user", c) for c in reversed(contents)), _words, _calls_and_text, max_chars, users)


def _words(content: dict[str, Any]) -> str:
    """:func:`~router.wire.gemini.parts.words_of` of a validated content (a part's text is a string)."""
    # read newest first, past every content of function responses (no text): no generator made
    words = [t for p in content["parts"] if (t := p.get("text")) and p.get("thought") is not True and not is_session_context(t)]
    return words[0] if len(words) == 1 else "\n".join(words)


def _calls_and_text(content: dict[str, Any]) -> tuple[list[str], str]:
    calls: list[str] = []
    texts: list[str] = []
    for part in content["parts"]:
        call = _call_of(part)
        if call is not None:
            calls.append(f"{call.get('name', '')}({orjson.dumps(call.get('args') or {}).decode()})")
        text = part.get("text")
        if text is not None and part.get("thought") is not True:
            texts.append(text)
    return calls, "".join(texts)


# A validated part's call or response: an object when present (either spelling, the camelCase one first).
def _call_of(part: dict[str, Any]) -> Any:
    value = part.get("functionCall")
    return part.get("function_call") if value is None else value


def _response_of(part: dict[str, Any]) -> Any:
    value = part.get("functionResponse")
    return part.get("function_response") if value is None else value


def opening(system: Any, contents: list[Any]) -> tuple[str, ...]:
    """What the fingerprint hashes: the system instruction's text and the first user content's text (role, text)."""
    parts: list[str] = []
    if system is not None and (text := all_text(system)):
        parts += ["system", text]
    for content in contents:
        if not is_model(content) and (text := all_text(content)):
            parts += ["user", text]
            break
    return tuple(parts)


def wants_json_output(body: dict[str, Any], generation: Any = None) -> bool:
    """``generation``: the body's ``generationConfig``, when the caller has read it."""
    generation = field(body, GENERATION) if generation is None else generation
    mime = field(generation, RESPONSE_MIME)
    return (isinstance(mime, str) and mime.lower().startswith("application/json")) or any(
        field(generation, name) is not None for name in (RESPONSE_SCHEMA, RESPONSE_JSON_SCHEMA)
    )


def includes_thoughts(body: dict[str, Any]) -> bool:
    """``thinkingConfig.includeThoughts``: the client shows the model's thoughts (thought parts in the answer)."""
    thinking = field(field(body, GENERATION), THINKING)
    return field(thinking, INCLUDE_THOUGHTS) is True


def wants_thinking(body: dict[str, Any], generation: Any = None) -> bool:
    """``thinkingConfig`` asks for thinking: thoughts included, a level, or a budget that is not 0 (off)."""
    thinking = field(field(body, GENERATION) if generation is None else generation, THINKING)
    if thinking is None:
        return False
    budget = field(thinking, THINKING_BUDGET)
    return field(thinking, INCLUDE_THOUGHTS) is True or bool(field(thinking, THINKING_LEVEL)) or (isinstance(budget, int) and budget != 0)


def offers_functions(tools: Any) -> bool:
    return isinstance(tools, list) and any(isinstance(t, dict) and field(t, DECLARATIONS) for t in tools)


def output_limit(body: dict[str, Any], generation: Any = None) -> int | None:
    limit = field(field(body, GENERATION) if generation is None else generation, MAX_OUTPUT)
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def gemini_view(body: dict[str, Any], parsed: GeminiRequest, turn_chars: int) -> RequestView:
    """The view of a validated Gemini body (``parsed``: :func:`~router.wire.gemini.validation.validate_gemini_body`'s)."""
    contents = parsed.contents
    offers = offers_functions(parsed.tools)
    generation = field(body, GENERATION)  # read once for the three facts it holds
    return RequestView(
        wire=GEMINI,
        model=parsed.model,
        stream=parsed.stream,
        conversation=GeminiConversation(parsed.system, contents, parsed.sse or not parsed.stream, parsed.layout),
        tools=parsed.tools,
        offers_tools=offers,
        tools_present=offers or parsed.tool_history,
        has_images=parsed.has_images,
        json_output=wants_json_output(body, generation),
        output_limit=output_limit(body, generation),
        turn_text=turn_text(contents, turn_chars, parsed.words),
        opening=opening(parsed.system, contents),
        usage_requested=True,  # a Gemini stream always reports usageMetadata
        thinking=wants_thinking(body, generation),
        reused_units=parsed.reused_units,
    )
