"""The mock upstream's OpenAI Responses API: requests read, answers built (pure).

Stateless, like Codex uses it (``store: false``, the whole conversation in
``input``): a request naming ``previous_response_id`` gets a 400, since the mock
keeps no responses. The answer is a ``response`` object whose ``output`` holds a
``reasoning`` item (when ``reasoning`` is asked for; with ``encrypted_content``
when ``include`` names it), then a ``message`` or a ``function_call`` item; the
stream is ``response.created``, ``response.in_progress``, per item
``response.output_item.added`` … ``response.output_item.done`` (with the
content-part, text, reasoning-summary and function-call-arguments events in
between), and ``response.completed`` with usage, every event numbered by
``sequence_number``. Errors are OpenAI's ``{"error": {"message", "type", "param", "code"}}``.
An input ending with a ``compaction_trigger`` (Codex compacting its session on OpenAI's provider)
gets one ``compaction`` item holding the mock's summary, sealed as only the mock reads it
(:func:`sealed_summary`); a compaction item it cannot read — another provider's, or the proxy's
(:mod:`router.wire.openai_responses.compaction`) — is refused, as OpenAI refuses encrypted content it
cannot decrypt. After a compaction item the turn's commands count as run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from router.tools.mock_answers import MOCK_SUMMARY, ONE_LISTING, asks_for_summary, FunctionTool, MockWire, ScriptedAnswer, call_tool, chunks, estimate_tokens, json_answer, next_command, reasoning_about, retrieve_call, scripted_answer, seal, sse, words

from router.wire.openai_responses import compaction

ENCRYPTED_REASONING = "reasoning.encrypted_content"


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    kind = "invalid_request_error" if 400 <= status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": None if status != 429 else "rate_limit_exceeded"}}


def request_error(body: dict[str, Any]) -> str | None:
    if not isinstance(body.get("model"), str):
        return "Missing required parameter: 'model'."
    if body.get("previous_response_id") is not None:
        return "previous_response_id is not supported: the mock keeps no responses; send the whole conversation in input"
    items = body.get("input")
    if not isinstance(items, (str, list)) or (isinstance(items, list) and not all(isinstance(i, dict) for i in items)):
        return "Invalid 'input': expected a string or a list of input items."
    for i, item in enumerate(_items(body)):
        if item.get("type") == "reasoning" and "encrypted_content" in item and item["encrypted_content"] != seal(_summary_text(item)):
            return f"input[{i}]: the encrypted content of this reasoning item could not be verified"
        if item.get("type") == compaction.ITEM and item.get("encrypted_content") != sealed_summary(MOCK_SUMMARY):
            return f"input[{i}]: the encrypted content of this compaction item could not be verified"
        if item.get("type") == "reasoning" and not item.get("encrypted_content") and body.get("store") is False:
            # OpenAI's answer (its wording) to a reasoning item it cannot have: nothing is stored without `store`
            return (f"Item with id '{item.get('id')}' not found. Items are not persisted when `store` is set to false. "
                    "Try again with `store` set to true, or remove this item from your input.")
    return _pairing_error(_items(body))


def _pairing_error(items: list[dict[str, Any]]) -> str | None:
    """OpenAI's rule for a stateless request (its wording): every ``function_call_output`` follows its
    ``function_call``, and every ``function_call`` has exactly one output."""
    calls: set[Any] = set()
    outputs: list[Any] = []
    for item in items:
        if item.get("type") == "function_call":
            calls.add(item.get("call_id"))
        elif item.get("type") == "function_call_output":
            if item.get("call_id") not in calls:
                return f"No tool call found for function call output with call_id {item.get('call_id')}."
            if item.get("call_id") in outputs:
                return f"Duplicate function call output for call_id {item.get('call_id')}."
            outputs.append(item.get("call_id"))
    unanswered = [call for call in calls if call not in outputs]
    return f"No tool output found for function call {sorted(map(str, unanswered))[0]}." if unanswered else None


def answer(body: dict[str, Any], text: str, commands: tuple[str, ...] = ONE_LISTING) -> ScriptedAnswer:
    """A function call running the user turn's next command when function tools are offered
    (:func:`next_command`); once every command has its output, text quoting the ``function_call_output``
    items after the last user message; else the text (JSON for ``text.format``)."""
    items = _items(body)
    last_user = max((i for i, item in enumerate(items) if item.get("role") == "user"), default=-1)
    outputs = [item for item in items[last_user + 1 :] if item.get("type") in ("function_call_output", "custom_tool_call_output")]
    tool_choice = body.get("tool_choice")
    tools = _function_tools(_offered(body))
    said = _output_text(items[last_user].get("content")) if last_user >= 0 else ""
    if compaction.asks_compaction(items) or asks_for_summary(said):  # the agent compacts its session: the mock's summary
        return ScriptedAnswer(text=MOCK_SUMMARY)
    if tool_choice == "none" or MOCK_SUMMARY in said or any(item.get("type") == compaction.ITEM for item in items):
        tools = []  # after a compaction, the turn's commands count as run (mock_answers.MOCK_SUMMARY)
    elif isinstance(tool_choice, dict) and tool_choice.get("type") == "function":  # the client names the function
        tools = [t for t in tools if t.name == tool_choice.get("name")]
    latest: list[str] = []
    for item in reversed(items):  # the outputs that end the input (a custom tool's too: Codex's code-mode exec)
        if item.get("type") not in ("function_call_output", "custom_tool_call_output"):
            break
        latest.append(_output_text(item.get("output")))
    retrieve = retrieve_call([t.name for t in tools], latest, f"call_mock_{len(items)}_retrieve")
    call = retrieve or call_tool(tools, f"call_mock_{len(items)}", next_command(commands, len(outputs)))
    format_ = body.get("text", {}).get("format") if isinstance(body.get("text"), dict) else None
    wants_json = isinstance(format_, dict) and format_.get("type") == "json_schema"
    otherwise = json_answer(format_.get("schema")) if wants_json else None
    scripted = scripted_answer(call, [_output_text(o.get("output")) for o in outputs], text, otherwise)
    if isinstance(body.get("reasoning"), dict):
        return replace(scripted, reasoning=reasoning_about(scripted))
    return scripted


def sealed_summary(summary: str) -> str:
    """The ``encrypted_content`` of the mock's compaction item: opaque, and checked when it comes back (the mock only
    ever summarises as :data:`MOCK_SUMMARY`)."""
    return seal("compaction\0" + summary)


def output_items(body: dict[str, Any], scripted: ScriptedAnswer) -> list[dict[str, Any]]:
    n = len(_items(body))
    items: list[dict[str, Any]] = []
    if scripted.reasoning is not None:
        reasoning: dict[str, Any] = {"id": f"rs_mock_{n}", "type": "reasoning", "summary": [{"type": "summary_text", "text": scripted.reasoning}]}
        if ENCRYPTED_REASONING in (body.get("include") or []):
            reasoning["encrypted_content"] = seal(scripted.reasoning)
        items.append(reasoning)
    if compaction.asks_compaction(_items(body)):
        items.append({"id": f"cmp_mock_{n}", "type": compaction.ITEM, "encrypted_content": sealed_summary(scripted.text)})
    elif scripted.tool_call is not None and scripted.tool_call.name in _custom_names(body):
        call = scripted.tool_call  # a custom (freeform) tool takes its input as raw text
        items.append({"id": f"ctc_mock_{n}", "type": "custom_tool_call", "status": "completed", "call_id": call.id, "name": call.name,
                      "input": str(call.arguments.get("input", ""))})  # fmt: skip
    elif scripted.tool_call is not None:
        call = scripted.tool_call
        items.append(
            {"id": f"fc_mock_{n}", "type": "function_call", "status": "completed", "call_id": call.id, "name": call.name, "arguments": call.arguments_json}
        )
    else:
        part = {"type": "output_text", "text": scripted.text, "annotations": [], "logprobs": []}
        items.append({"id": f"msg_mock_{n}", "type": "message", "status": "completed", "role": "assistant", "content": [part]})
    return items


def message(body: dict[str, Any], scripted: ScriptedAnswer) -> dict[str, Any]:
    """The finished ``response`` object."""
    output = output_items(body, scripted)
    return _response(body, "completed", output, _usage(body, output, scripted))


def events(body: dict[str, Any], scripted: ScriptedAnswer) -> list[bytes]:
    output = output_items(body, scripted)
    payloads: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(body, "in_progress", [], None)},
        {"type": "response.in_progress", "response": _response(body, "in_progress", [], None)},
    ]
    for index, item in enumerate(output):
        payloads.extend(_item_events(index, item))
    payloads.append({"type": "response.completed", "response": _response(body, "completed", output, _usage(body, output, scripted))})
    return [sse(p["type"], {**p, "sequence_number": n}) for n, p in enumerate(payloads)]


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    """One output item opened, filled and closed. The ``added`` item is the ``done`` one with empty content."""
    at = {"item_id": item["id"], "output_index": index}
    if item["type"] == "reasoning":
        opened = {**item, "summary": []}
        middle: list[dict[str, Any]] = []
        for s, part in enumerate(item["summary"]):
            where = {**at, "summary_index": s}
            middle.append({"type": "response.reasoning_summary_part.added", **where, "part": {"type": "summary_text", "text": ""}})
            middle += [{"type": "response.reasoning_summary_text.delta", **where, "delta": piece} for piece in chunks(part["text"], 16)]
            middle.append({"type": "response.reasoning_summary_text.done", **where, "text": part["text"]})
            middle.append({"type": "response.reasoning_summary_part.done", **where, "part": part})
    elif item["type"] == "custom_tool_call":
        opened = {**item, "status": "in_progress", "input": ""}
        middle = [{"type": "response.custom_tool_call_input.delta", **at, "delta": piece} for piece in chunks(item["input"], 7)]
        middle.append({"type": "response.custom_tool_call_input.done", **at, "input": item["input"]})
    elif item["type"] == compaction.ITEM:
        opened, middle = item, []
    elif item["type"] == "function_call":
        opened = {**item, "status": "in_progress", "arguments": ""}
        middle = [{"type": "response.function_call_arguments.delta", **at, "delta": piece} for piece in chunks(item["arguments"], 7)]
        middle.append({"type": "response.function_call_arguments.done", **at, "name": item["name"], "arguments": item["arguments"]})
    else:
        opened = {**item, "status": "in_progress", "content": []}
        part = item["content"][0]
        where = {**at, "content_index": 0}
        middle = [{"type": "response.content_part.added", **where, "part": {**part, "text": ""}}]
        middle += [{"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []} for piece in words(part["text"])]
        middle.append({"type": "response.output_text.done", **where, "text": part["text"], "logprobs": []})
        middle.append({"type": "response.content_part.done", **where, "part": part})
    return [
        {"type": "response.output_item.added", "output_index": index, "item": opened},
        *middle,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def _response(body: dict[str, Any], status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": f"resp_mock_{len(_items(body))}",
        "object": "response",
        "created_at": 0,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model", "mock"),
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "usage": usage,
        "metadata": body.get("metadata") or {},
    }


def _usage(body: dict[str, Any], output: list[dict[str, Any]], scripted: ScriptedAnswer) -> dict[str, Any]:
    prompt = estimate_tokens(body.get("instructions"), body.get("input"), body.get("tools"))
    completion = estimate_tokens(output)
    reasoning = estimate_tokens(scripted.reasoning) if scripted.reasoning is not None else 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + completion,
    }


def _items(body: dict[str, Any]) -> list[dict[str, Any]]:
    """``input`` as items: a plain string is one user message."""
    items = body.get("input")
    if isinstance(items, str):
        return [{"type": "message", "role": "user", "content": items}]
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _summary_text(item: dict[str, Any]) -> str:
    summary = item.get("summary")
    return "".join(str(p.get("text", "")) for p in summary if isinstance(p, dict)) if isinstance(summary, list) else ""


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    return ""


def _offered(body: dict[str, Any]) -> list[Any]:
    """``tools`` and those of ``additional_tools`` items (Codex on its default model), the ``functions`` namespace opened."""
    tools = list(body.get("tools") or []) if isinstance(body.get("tools"), list) else []
    tools += [t for item in _items(body) if item.get("type") == "additional_tools" for t in item.get("tools") or []]
    opened: list[Any] = []
    for tool in tools:
        if isinstance(tool, dict) and tool.get("type") == "namespace" and tool.get("name") == "functions":
            opened += tool.get("tools") or []
        else:
            opened.append(tool)
    return opened


CUSTOM_SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}


def _custom_names(body: dict[str, Any]) -> set[str]:
    return {t["name"] for t in _offered(body) if isinstance(t, dict) and t.get("type") == "custom" and isinstance(t.get("name"), str)}


def _function_tools(tools: Any) -> list[FunctionTool]:
    """Function and custom tools (a custom one as a function of its ``input``): ``namespace``, ``web_search`` and
    other built-in types are not the client's to run."""
    if not isinstance(tools, list):
        return []
    return [
        FunctionTool(t["name"], CUSTOM_SCHEMA if t["type"] == "custom" else t.get("parameters") if isinstance(t.get("parameters"), dict) else {},
                     str(t.get("description") or ""))
        for t in tools
        if isinstance(t, dict) and t.get("type") in ("function", "custom") and isinstance(t.get("name"), str)
    ]  # fmt: skip


WIRE = MockWire("openai-responses", error_body, request_error, answer, message, events)
