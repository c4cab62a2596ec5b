"""How a Gemini request's contents lie as the neutral view's units (:mod:`.view`). Pure.

Found once per request: by the fused check on its one pass over the contents
(:func:`~router.wire.gemini.validation.check_gemini_body`, for the usual contents) or content by
content with :func:`place` (every other content, and every content when no check ran). Units:
the ``systemInstruction`` (one unit), then each content — except that a user content's
``functionResponse`` parts are each a unit of their own and its other parts one more. Each unit is
the content in the estimator's terms (text parts as text, images as images, every other part
counted by its JSON). The same pass notes what the upstream body needs: the first call of each
model content that has no thought signature, and where Google's current turn starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from router.core.request_view import ToolResult, Unit
from router.wire.gemini.parts import FILE_DATA, INLINE_DATA, all_text, is_image_part, parts_of

_DATA_KEYS = frozenset((*INLINE_DATA, *FILE_DATA))


@dataclass(slots=True)
class GeminiLayout:
    """The units; each tool result (its unit, and its ``(content, part)`` place and the response
    field its text is in); the assistant turns' starts; the unsigned first calls; the current turn."""

    units: list[Unit] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    where: list[tuple[int, int]] = field(default_factory=list)
    fields: list[str | None] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    unsigned: list[tuple[int, int]] = field(default_factory=list)  # every model content's, current turn or not
    turn_start: int = 0  # the last user content with more than function responses (0: none)

    def unsigned_calls(self) -> list[tuple[int, int]]:
        """The unsigned first calls of Google's current turn (what the upstream body signs)."""
        unsigned, start = self.unsigned, self.turn_start
        return [at for at in unsigned if at[0] >= start] if unsigned and start else unsigned


def start(system: Any) -> GeminiLayout:
    """An empty layout, the system instruction's text its first unit when it has any."""
    layout = GeminiLayout()
    if system is not None and (text := all_text(system)):
        layout.units.append({"role": "system", "content": [{"type": "text", "text": text}]})
    return layout


def layout_of(system: Any, contents: list[Any]) -> GeminiLayout:
    layout = start(system)
    for c, content in enumerate(contents):
        place(layout, c, content)
    return layout


def response_text(response: Any) -> tuple[str, str | None]:
    """A function response's text for pinch, and the field that holds it (None: the whole response's JSON)."""
    if isinstance(response, dict) and len(response) == 1:
        ((key, value),) = response.items()
        if isinstance(value, str):
            return value, key
    if response is None:
        return "", None
    return orjson.dumps(response).decode(), None


def neutral_parts(parts: list[dict[str, Any]]) -> list[Any]:
    """Parts in the estimator's terms: text as text, images as images, anything else (calls, signatures) as it is."""
    out: list[Any] = []
    for part in parts:
        text = part.get("text")
        if type(text) is str:
            out.append({"type": "text", "text": text})
            if len(part) > 1:  # a signature, the thought flag
                out.append({k: v for k, v in part.items() if k != "text"})
        elif not _DATA_KEYS.isdisjoint(part) and is_image_part(part):  # a call or a response is no image: not looked into
            out.append({"type": "image"})
        else:
            out.append(part)
    return out


def add_result(layout: GeminiLayout, c: int, p: int, response: dict[str, Any]) -> None:
    """Place the function response at ``contents[c].parts[p]`` as a unit of its own. Its id is its
    ``id`` when it has one, else ``<name>@<content>.<part>`` (stable as the conversation grows)."""
    name = response.get("name")
    call_id = response.get("id")
    stable = call_id if type(call_id) is str and call_id else f"{name}@{c}.{p}"
    text, key = response_text(response.get("response"))
    unit: Unit = {"role": "tool", "name": name, "id": stable, "content": text}
    if response.get("parts"):
        unit["parts"] = neutral_parts(parts_of(response))
    units = layout.units
    layout.results.append(ToolResult(len(units), stable, text))
    layout.where.append((c, p))
    layout.fields.append(key)
    units.append(unit)


def place(layout: GeminiLayout, c: int, content: dict[str, Any]) -> None:
    """Place ``contents[c]`` (a validated content: its parts are Part objects)."""
    parts = content["parts"]
    units = layout.units
    if content.get("role") == "model":
        layout.turns.append(len(units))
        units.append({"role": "assistant", "content": neutral_parts(parts)})
        for p, part in enumerate(parts):  # first_call_at and signature_of, inline: read for every model content
            call = part.get("functionCall")
            if call is None:
                call = part.get("function_call")
            if type(call) is dict:
                signature = part.get("thoughtSignature")
                if signature is None:
                    signature = part.get("thought_signature")
                if type(signature) is not str or not signature:
                    layout.unsigned.append((c, p))
                break
        return
    others = []
    for p, part in enumerate(parts):
        response = part.get("functionResponse")  # either spelling, the camelCase one first
        if response is None:
            response = part.get("function_response")
            if response is None:
                others.append(part)
                continue
        add_result(layout, c, p, response)
    if others:
        layout.turn_start = c
        units.append({"role": "user", "content": neutral_parts(others)})
