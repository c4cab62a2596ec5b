"""The mock upstream's Anthropic Messages API: requests read, answers built (pure).

Shapes follow Anthropic's API as Claude Code and the ``anthropic`` SDK consume
it: a ``message`` object, or the stream ``message_start``, ``ping``,
``content_block_start`` / ``content_block_delta`` (``thinking_delta`` then
``signature_delta``, ``text_delta``, ``input_json_delta``) /
``content_block_stop`` per block, ``message_delta`` (stop reason, output usage),
``message_stop``. Errors are ``{"type": "error", "error": {"type", "message"}, "request_id"}``.

Models that check thinking's prefix (:func:`router.wire.anthropic_messages.thinking.binds_thinking`:
the ids Anthropic documents, e.g. ``claude-fable-5-1``) sign each thinking block over a
digest of its prefix — ``system``, ``tools``, the messages and blocks before it, without
``cache_control`` (Claude Code moves its breakpoints every turn, and Anthropic says Claude
Code needs no change) — and refuse a later request whose prefix of a block differs, with
Anthropic's wording: what a proxy that rewrites history before signed thinking gets.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import replace
from typing import Any

import orjson

from router.wire.anthropic_messages.errors import error_type
from router.tools.pinch_measures import as_cached
from router.wire.anthropic_messages.thinking import binds_thinking
from router.tools.mock_answers import MOCK_SUMMARY, ONE_LISTING, asks_for_summary, summary_text, FunctionTool, MockWire, ScriptedAnswer, call_tool, chunks, estimate_tokens, json_answer, next_command, reasoning_about, retrieve_call, scripted_answer, seal, sse, words

def error_body(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error, with the ``request_id`` its errors carry (also their ``request-id`` header): made
    of the error itself, so the mock stays deterministic."""
    digest = hashlib.sha256(f"{status} {message}".encode()).hexdigest()[:24]
    return {"type": "error", "error": {"type": error_type(status), "message": message}, "request_id": f"req_mock{digest}"}


def request_error(body: dict[str, Any]) -> str | None:
    """What Anthropic would reject with a 400 among what the mock can check: required fields, thinking
    signatures, tool results split from their calls, and thinking on where Anthropic refuses it."""
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or isinstance(body.get("max_tokens"), bool) or body["max_tokens"] < 1:
        return "max_tokens: Field required (a positive integer)"
    return _thinking_config_error(body) or _messages_error(body, bound=binds_thinking(body["model"])) or _thinking_turn_error(body)


THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def _thinks(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _thinking_config_error(body: dict[str, Any]) -> str | None:
    """Anthropic's rules for a manual thinking budget: at least 1024, and below ``max_tokens`` (as
    without the interleaved-thinking beta, which the mock does not model)."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if body["max_tokens"] <= budget:
        return f"`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at {THINKING_DOCS}#max-tokens-and-context-window-size"
    return None


def _thinking_turn_error(body: dict[str, Any]) -> str | None:
    """Anthropic's rule (its wording) with thinking on: the last assistant message, when it calls
    tools, starts with a thinking or redacted thinking block — what a session that reached Claude
    mid tool loop from a model without Anthropic's thinking breaks."""
    if not _thinks(body):
        return None
    messages = body["messages"]
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"), None)
    blocks = _blocks(messages[at].get("content")) if at is not None else []
    if not any(b.get("type") == "tool_use" for b in blocks) or blocks[0].get("type") in ("thinking", "redacted_thinking"):
        return None
    return (
        f"messages.{at}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{blocks[0].get('type')}`. "
        "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
        "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking "
        f"blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at {THINKING_DOCS}"
    )


def count_tokens_error(body: dict[str, Any]) -> str | None:
    """``count_tokens`` takes what ``messages`` takes, minus ``max_tokens``; a thinking block's prefix is
    not checked there (Anthropic's docs say nothing of count_tokens running that check)."""
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    return _messages_error(body)


def _messages_error(body: dict[str, Any], bound: bool = False) -> str | None:
    """Shape, pairing, and each thinking block sent back as signed; with ``bound`` (a model that
    checks thinking's prefix) also its prefix as it was when the block was produced."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        return "messages: a non-empty list of message objects is required"
    for m, message in enumerate(messages):
        for b, block in enumerate(_blocks(message.get("content"))):
            if block.get("type") != "thinking":
                continue
            text, signature = str(block.get("thinking", "")), block.get("signature")
            signed_over = _bound_to(text, signature)
            if signed_over is None and signature != seal(text):
                return f"messages.{m}.content.{b}: Invalid `signature` in `thinking` block"
            if bound and signed_over is not None and signed_over != prefix_digest(body, m, b):
                return f"messages.{m}.content.{b}: {BOUND_ELSEWHERE}"
    return _pairing_error(messages)


BOUND_ELSEWHERE = (
    "Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the block, "
    'or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block". That setting requires the '
    "`thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header."
)
_BOUND = b"\x01"  # a bound signature: this byte, the prefix digest, then the seal over text and digest


def prefix_digest(body: dict[str, Any], message: int, block: int) -> bytes:
    """What a thinking block at ``(message, block)`` is bound to: ``system``, ``tools``, the messages
    before it and the blocks before it in its own, as a prefix cache compares them (16 bytes)."""
    messages = body.get("messages") or []
    own = _blocks(messages[message].get("content"))[:block] if message < len(messages) else []
    prefix = [body.get("system"), body.get("tools"), messages[:message], own]
    # as a prefix cache compares it: cache_control left out, a string content the one text block it stands for
    # (Claude Code sends its environment block as blocks, then as a string on later turns)
    return hashlib.sha256(orjson.dumps(as_cached(prefix), option=orjson.OPT_SORT_KEYS)).digest()[:16]


def bound_seal(text: str, digest: bytes) -> str:
    """The signature of a thinking block a binding model produced over the prefix ``digest``."""
    mac = hashlib.sha256(b"pinch-router mock bound reasoning\0" + digest + text.encode()).digest()
    return base64.b64encode(_BOUND + digest + mac).decode()


def _bound_to(text: str, signature: Any) -> bytes | None:
    """The prefix digest a bound signature of ``text`` commits to; None when it is not one (or forged)."""
    try:
        raw = base64.b64decode(signature, validate=True) if isinstance(signature, str) else b""
    except ValueError:
        return None
    if len(raw) != 49 or raw[:1] != _BOUND:
        return None
    digest = raw[1:17]
    return digest if bound_seal(text, digest) == signature else None


def without_cache_control(value: Any) -> Any:
    """``value`` with every ``cache_control`` key left out, at any depth."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value


def _pairing_error(messages: list[dict[str, Any]]) -> str | None:
    """Anthropic's rule (its wording): every ``tool_use`` is answered by one ``tool_result`` in the next
    message, every ``tool_result`` answers a ``tool_use`` of the previous one. A proxy that prunes or
    reorders a transcript wrongly breaks it, and the real API refuses every later request."""
    turns = [(i, m) for i, m in enumerate(messages) if m.get("role") != "system"]  # mid-conversation system messages sit between
    for k, (i, message) in enumerate(turns):
        blocks = _blocks(message.get("content"))
        if message.get("role") == "assistant" and k + 1 < len(turns):
            next_at, following = turns[k + 1]
            answered = {b.get("tool_use_id") for b in _blocks(following.get("content")) if b.get("type") == "tool_result"}
            missing = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use" and b.get("id") not in answered]
            if missing:
                return (
                    f"messages.{next_at}: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(missing)}. "
                    "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                )
        if message.get("role") == "user":
            results = [str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"]
            previous = turns[k - 1][1] if k > 0 else {}
            offered = {b.get("id") for b in _blocks(previous.get("content")) if b.get("type") == "tool_use"} if previous.get("role") == "assistant" else set()
            unexpected = [r for r in results if r not in offered]
            if unexpected:
                return (
                    f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: {', '.join(unexpected)}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
            repeated = sorted({r for r in results if results.count(r) > 1})
            if repeated:
                return f"messages.{i}: more than one `tool_result` block for `tool_use` ids: {', '.join(repeated)}"
    return None


def answer(body: dict[str, Any], text: str, commands: tuple[str, ...] = ONE_LISTING) -> ScriptedAnswer:
    """A tool call running the user turn's next command when tools are offered (:func:`next_command`); once
    every command has its result, text quoting the last user turn's tool results; else the text (JSON for
    ``output_config.format``). A request asking for a summary of the conversation (Claude Code's ``/compact``
    and auto-compact: in its last user message) gets the mock's summary (:func:`summary_text`), and a turn
    whose opening message holds it counts its commands as run. Thinking first when ``thinking`` is on."""
    messages = body.get("messages") or []
    user_turns = [m for m in messages if m.get("role") == "user"]
    results = [b for b in _blocks(user_turns[-1].get("content")) if b.get("type") == "tool_result"] if user_turns else []
    # the user's own last message is the last user turn that answers no tool call
    turn_start = max((i for i, m in enumerate(user_turns) if not any(b.get("type") == "tool_result" for b in _blocks(m.get("content")))), default=-1)
    results_this_turn = sum(b.get("type") == "tool_result" for m in user_turns[turn_start + 1 :] for b in _blocks(m.get("content")))
    asked = next((said for said in (_text(user_turns[-1].get("content")) if user_turns else "", _text(body.get("system"))[:2000]) if asks_for_summary(said)), None)
    if asked is not None:
        return _thinking(body, ScriptedAnswer(text=summary_text(asked)))
    tool_choice = body.get("tool_choice") if isinstance(body.get("tool_choice"), dict) else {}
    tools = _function_tools(body.get("tools"))
    if tool_choice.get("type") == "none" or (turn_start >= 0 and MOCK_SUMMARY in _text(user_turns[turn_start].get("content"))):
        tools = []  # after a compaction, the turn's commands count as run (mock_answers.MOCK_SUMMARY)
    elif tool_choice.get("type") == "tool":  # the client names the tool to call
        tools = [t for t in tools if t.name == tool_choice.get("name")]
    retrieve = retrieve_call([t.name for t in tools], [_text(r.get("content")) for r in results], f"toolu_mock_{len(messages)}_retrieve")
    call = retrieve or call_tool(tools, f"toolu_mock_{len(messages)}", next_command(commands, results_this_turn))
    format_ = body.get("output_config", {}).get("format") if isinstance(body.get("output_config"), dict) else None
    wants_json = isinstance(format_, dict) and format_.get("type") == "json_schema"
    otherwise = json_answer(format_.get("schema")) if wants_json else None
    return _thinking(body, scripted_answer(call, [_text(r.get("content")) for r in results], text, otherwise))


def _thinking(body: dict[str, Any], scripted: ScriptedAnswer) -> ScriptedAnswer:
    """``scripted`` with its thinking first when the request turns thinking on."""
    thinking = body.get("thinking") if isinstance(body.get("thinking"), dict) else {}
    if thinking.get("type") in ("enabled", "adaptive"):
        return replace(scripted, reasoning=reasoning_about(scripted))
    return scripted


def content_blocks(scripted: ScriptedAnswer, bound_to: bytes | None = None) -> list[dict[str, Any]]:
    """The answer's blocks; its thinking signed over the prefix digest ``bound_to`` (a binding model), else sealed alone."""
    blocks: list[dict[str, Any]] = []
    if scripted.reasoning is not None:
        signature = seal(scripted.reasoning) if bound_to is None else bound_seal(scripted.reasoning, bound_to)
        blocks.append({"type": "thinking", "thinking": scripted.reasoning, "signature": signature})
    if scripted.tool_call is not None:
        call = scripted.tool_call
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    else:
        blocks.append({"type": "text", "text": scripted.text})
    return blocks


def input_tokens(body: dict[str, Any]) -> int:
    return estimate_tokens(body.get("system"), body.get("messages"), body.get("tools"))


def message(body: dict[str, Any], scripted: ScriptedAnswer) -> dict[str, Any]:
    model = body.get("model")
    # the answer is the next message: its first block's prefix is the whole request
    bound_to = prefix_digest(body, len(body.get("messages") or []), 0) if isinstance(model, str) and binds_thinking(model) else None
    blocks = content_blocks(scripted, bound_to)
    return {
        "id": _message_id(body),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "mock"),
        "content": blocks,
        "stop_reason": "tool_use" if scripted.tool_call else "end_turn",
        "stop_sequence": None,
        "usage": _usage(input_tokens(body), estimate_tokens(blocks)),
    }


def events(body: dict[str, Any], scripted: ScriptedAnswer) -> list[bytes]:
    """The streamed ``message``: every block opened, filled in fragments and closed, in order."""
    whole = message(body, scripted)
    start = {**whole, "content": [], "stop_reason": None, "usage": {**whole["usage"], "output_tokens": 1}}
    out = [sse("message_start", {"type": "message_start", "message": start}), sse("ping", {"type": "ping"})]
    for index, block in enumerate(whole["content"]):
        empty = {"thinking": {"thinking": "", "signature": ""}, "text": {"text": ""}, "tool_use": {"input": {}}}[block["type"]]
        out.append(sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": {**block, **empty}}))
        for delta in _deltas(block):
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    final = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    out.append(sse("message_delta", {"type": "message_delta", "delta": final, "usage": {"output_tokens": whole["usage"]["output_tokens"]}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return out


def _deltas(block: dict[str, Any]) -> list[dict[str, Any]]:
    if block["type"] == "thinking":
        thinking = [{"type": "thinking_delta", "thinking": piece} for piece in chunks(block["thinking"], 16)]
        return [*thinking, {"type": "signature_delta", "signature": block["signature"]}]
    if block["type"] == "tool_use":
        # small fragments, so a client (or proxy) that does not reassemble them visibly breaks
        return [{"type": "input_json_delta", "partial_json": piece} for piece in chunks(orjson.dumps(block["input"]).decode(), 7)]
    return [{"type": "text_delta", "text": piece} for piece in words(block["text"])]


def _usage(input_count: int, output_count: int) -> dict[str, int]:
    return {"input_tokens": input_count, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": output_count}


def _message_id(body: dict[str, Any]) -> str:
    return f"msg_mock_{len(body.get('messages') or [])}"


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text(content: Any) -> str:
    """The words of a message's content, a tool result's or ``system``: a string, or its text blocks."""
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text")


def _function_tools(tools: Any) -> list[FunctionTool]:
    """Client tools (with an ``input_schema``); server tools such as web search are not the client's to run."""
    if not isinstance(tools, list):
        return []
    return [
        FunctionTool(t["name"], t["input_schema"])
        for t in tools
        if isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("input_schema"), dict)
    ]


def count_tokens(body: dict[str, Any]) -> dict[str, int]:
    return {"input_tokens": input_tokens(body)}


WIRE = MockWire("anthropic-messages", error_body, request_error, answer, message, events)
