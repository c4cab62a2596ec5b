"""OpenAI Responses input items as the neutral view (:mod:`router.core.request_view`). Pure.

A unit is an input item. A tool result is a ``function_call_output`` item, or a
``custom_tool_call_output`` (a custom tool's, as Codex's code-mode ``exec``), its
id the ``call_id``, so a unit holds at most one result and pinch can only
ever rewrite an output: ``reasoning`` items, their ``encrypted_content``, the
messages and the calls are never candidates and go out as they came. An
assistant turn starts at each run of the model's own items (``reasoning``,
``function_call``, an ``assistant`` message, …) — what one chat assistant
message holds. A result's tool is the ``name`` of the ``function_call`` (or
``custom_tool_call``) with its ``call_id``.

The client offers tools when its ``tools`` holds any, or an ``additional_tools``
input item does (Codex on its default model offers its tools there, and no ``tools``).

``instructions`` count as the opening system part and are sent as they are
(the view's ``tools`` carries them for counting, since they are no item).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from router.core.fingerprint import opening_parts
from router.core.turn_text import latest_turn_text
from router.core.request_view import BodyChanges, Conversation, RequestView, Rewrites, ToolResult, call_arguments, clean_tool_name, rewritten_array, tool_results_of, units_with
from router.wire.openai_responses.compaction import readable
from router.wire.openai_responses.validation import (
    CALL_ITEM_TYPES,
    TEXT_PARTS,
    CheckedResponses,
    Item,
    ItemScan,
    ResponsesRequest,
    has_image,
    is_model_item,
    is_proxy_reasoning,
    is_result_item,
    item_type,
)

OPENAI_RESPONSES = "openai-responses"
JSON_OUTPUT_FORMATS = frozenset({"json_object", "json_schema"})
class ResponsesConversation(Conversation):
    """:class:`router.core.request_view.Conversation` over a Responses ``input`` as items."""

    __slots__ = ("items", "proxy_items", "_units", "_names", "_results", "_calls")
    result_key = "output"
    result_id_key = "call_id"

    def __init__(self, items: list[Item], proxy_items: bool = False, scan: ItemScan | None = None) -> None:
        """``proxy_items``: ``items`` hold an item the proxy made (validation found it: ``is_proxy_item``);
        ``scan``: the results and the calls' names as the fused check found them (else found when asked)."""
        self.items = items
        self.proxy_items = proxy_items
        # the index of each result item (function_call_output, custom_tool_call_output)
        self._units: list[int] | None = scan.results if scan is not None else None
        self._names: dict[str, Any] = scan.names if scan is not None else {}
        self._results: list[ToolResult] | None = None
        self._calls: dict[str, Item] | None = None

    @property
    def units(self) -> list[Item]:
        return self.items

    def _scan(self) -> list[int]:
        # once per pruned request, over every item: the results and the calls' names (the turns
        # pinch needs are found by walking back from the end, last_turns_start)
        units: list[int] = []
        for index, item in enumerate(self.items):
            kind = item_type(item)
            if is_result_item(item):
                units.append(index)
            elif kind in CALL_ITEM_TYPES and isinstance(item.get("call_id"), str):
                self._names.setdefault(item["call_id"], item.get("name"))
        self._units = units
        return units

    def result_units(self) -> list[int]:
        return self._units if self._units is not None else self._scan()

    def tool_results(self) -> list[ToolResult]:
        if self._results is None:
            self._results = tool_results_of(self)
        return self._results

    def turn_starts(self) -> list[int]:
        items = self.items
        return [index for index, item in enumerate(items) if is_model_item(item) and not (index and is_model_item(items[index - 1]))]

    def last_turns_start(self, count: int) -> int:
        items, seen, index = self.items, 0, len(self.items)
        while index > 0:
            index -= 1
            if not is_model_item(items[index]):
                continue
            while index > 0 and is_model_item(items[index - 1]):
                index -= 1  # back to the start of this run of the model's items
            seen += 1
            if seen == count:
                return index
        return 0

    def tool_name(self, unit: int) -> str:
        if self._units is None:
            self._scan()  # the calls' names are found by the same pass
        return clean_tool_name(self._names.get(self.items[unit].get("call_id")))

    def tool_call(self, unit: int) -> tuple[str, str]:
        calls = self._calls
        if calls is None:
            # first sight only: the calls by call_id, the first of each as for the names (the scan keeps names alone)
            calls = self._calls = {}
            for item in self.items:
                if item_type(item) in CALL_ITEM_TYPES and isinstance(item.get("call_id"), str):
                    calls.setdefault(item["call_id"], item)
        call = calls.get(self.items[unit].get("call_id")) or {}
        # a custom tool's call carries its freeform ``input`` instead of ``arguments``
        return self.tool_name(unit), call_arguments(call.get("arguments", call.get("input")))


def responses_view(body: dict[str, Any], parsed: ResponsesRequest, turn_chars: int, checked: CheckedResponses | None = None) -> RequestView:
    """The view of a validated Responses body (``parsed`` is :func:`validate_responses_body`'s);
    ``checked``: the fused check's findings (:func:`~router.wire.openai_responses.validation.check_responses_body`),
    which spare the view its own passes over the items."""
    items = list(parsed.items)
    scan = checked.scan if checked is not None else None
    if scan is None:
        history_tools = any(item_type(i) in CALL_ITEM_TYPES or is_result_item(i) for i in items)
        has_images = any(has_image(i) for i in items)
    else:
        history_tools, has_images = scan.history_tools, scan.has_images
    tools = list(parsed.tools)
    offers = bool(tools) or _additional_tools(items)
    format_ = body["text"].get("format") if isinstance(body.get("text"), dict) else None
    instructions = parsed.instructions
    opening = opening_parts(items)
    users = (items[i] for i in reversed(scan.users)) if scan is not None else None
    if instructions:
        opening = ("system", instructions, *opening)
    return RequestView(
        wire=OPENAI_RESPONSES,
        model=parsed.model,
        stream=parsed.stream,
        conversation=ResponsesConversation(items, parsed.proxy_items, scan),
        tools=_counted_extras(tools, instructions),
        offers_tools=offers,
        tools_present=offers or history_tools,
        has_images=has_images,
        json_output=isinstance(format_, dict) and format_.get("type") in JSON_OUTPUT_FORMATS,
        output_limit=parsed.output_limit,
        turn_text=latest_turn_text(lambda: _newest_first(items), _user_text, _assistant_calls_and_text, turn_chars, users),  # type: ignore[arg-type]
        opening=opening,
        usage_requested=True,  # a Responses stream always reports usage, in response.completed
        reused_units=checked.reused if checked is not None else 0,  # a unit is an item
    )


def _additional_tools(items: list[Item]) -> bool:
    """An ``additional_tools`` input item offers tools (Codex on its default model: it sends no ``tools``).
    Asked only of a request whose ``tools`` offer none; stops at the first (Codex sends it first)."""
    return any(type(item) is dict and item.get("type") == "additional_tools" and item.get("tools") for item in items)


def _counted_extras(tools: list[dict[str, Any]], instructions: str | None) -> Any:
    """What is counted besides the units: the tool schemas, and the instructions (no unit holds them)."""
    if not instructions:
        return tools or None
    return [*tools, {"instructions": instructions}]


def _newest_first(items: list[Item]) -> Iterator[tuple[str, Item | list[Item]]]:
    """The items as ``(role, message)`` pairs, newest first, the way the translation to chat groups
    them (:mod:`router.translate.responses_to_chat`): a message item is one message (a developer's
    or system's is a system one); a function call joins the assistant message before it, else opens
    one; outputs end such a group and are no message, nor are reasoning and the other items. An
    assistant "message" is the list of its items: its text first when it has one, then its calls.
    Lazy, from the end: the turn text reads only as far back as it needs."""
    calls: list[Item] = []  # the calls after the item being read, newest first
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        kind = item.get("type")  # item_type, inline
        if type(kind) is not str:
            kind = "message"
        if kind == "function_call":
            calls.append(item)
        elif kind == "message":
            role = item.get("role")
            if role == "assistant":
                yield "assistant", [item, *reversed(calls)]
                calls = []
                continue
            if calls:
                yield "assistant", calls[::-1]
                calls = []
            yield ("system" if role in ("developer", "system") else role), item
        elif kind == "function_call_output" and calls:
            yield "assistant", calls[::-1]
            calls = []
    if calls:
        yield "assistant", calls[::-1]


def _user_text(item: Item) -> str:
    """A user message's words as the chat translation gives them: its text parts joined by a blank
    line, or by a newline when images come with them (its content then stays a list of parts)."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    texts = [p["text"] for p in content if isinstance(p, dict) and p.get("type") in TEXT_PARTS and isinstance(p.get("text"), str)]
    with_image = any(isinstance(p, dict) and p.get("type") == "input_image" and isinstance(p.get("image_url"), str) for p in content)
    return ("\n" if with_image else "\n\n").join(texts)


def _assistant_calls_and_text(turn: list[Item]) -> tuple[list[str], str]:
    # a turn is its message first when it has one, then only calls (_newest_first)
    head = turn[0] if turn and turn[0].get("type", "message") != "function_call" else None
    calls = [f"{item.get('name', '')}({item.get('arguments', '')})" for item in (turn[1:] if head is not None else turn)]
    return calls, _text(head.get("content")) if head is not None else ""


def _text(content: Any) -> str:
    """A string, or the text of the parts (output_text, input_text, refusal) joined by a blank line."""
    if isinstance(content, str):
        return content
    texts = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict):
            text = part.get("text") if part.get("type") != "refusal" else part.get("refusal")
            if isinstance(text, str):
                texts.append(text)
    return "\n\n".join(texts)


def items_with(items: list[Item], result_units: Sequence[int], rewrites: Rewrites) -> list[Item]:
    """``items`` with each rewritten result's ``output`` replaced (:func:`units_with`)."""
    return units_with(items, result_units, rewrites, "output")


def body_with_changes(body: dict[str, Any], view: RequestView, changes: BodyChanges) -> dict[str, Any]:
    """The client's Responses body with only the chain's changes written in: ``model``, pinched
    outputs, ``max_output_tokens`` lowered to the candidate's limit (never added), and
    ``prompt_cache_key`` when the client sent none. Every other field is the client's, in its order
    — but for a Responses provider, the reasoning items the proxy made from a chat model's
    thinking are left out (:func:`~router.wire.openai_responses.validation.is_proxy_reasoning`), and
    a compaction item the proxy made from a chat model's summary is that summary as a user message
    (:func:`~router.wire.openai_responses.compaction.readable`): the provider could read neither.

    A usage request has no Responses counterpart: its streams always end with usage.
    """
    out = dict(body)
    out["model"] = changes.upstream_model
    conversation = view.conversation
    assert isinstance(conversation, ResponsesConversation)
    if changes.rewrites:
        items, result_units = conversation.items, conversation.result_units()
        out["input"] = rewritten_array(changes, items, result_units.__getitem__, lambda rewrites: items_with(items, result_units, rewrites))
    if conversation.proxy_items and not changes.translated:  # a translation reads them itself
        out["input"] = [readable(item) for item in out["input"] if not is_proxy_reasoning(item)]
    limit = body.get("max_output_tokens")
    if changes.output_tokens is not None and isinstance(limit, int) and limit > changes.output_tokens:
        out["max_output_tokens"] = changes.output_tokens
    if changes.prompt_cache_key is not None and "prompt_cache_key" not in body:
        out["prompt_cache_key"] = changes.prompt_cache_key
    if changes.tool is not None:
        tool = changes.tool
        tools = body.get("tools")
        declared = {"type": "function", "name": tool.name, "description": tool.description, "parameters": tool.parameters}
        out["tools"] = [*(tools if isinstance(tools, list) else ()), declared]
    return out
