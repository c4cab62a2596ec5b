"""Small builders of plain test data."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict, CIMultiDictProxy

from router.contract.context import RequestContext
from router.core.errors import ApiError
from router.core.request_view import RequestView
from router.wire.openai_chat.adapter import OPENAI_CHAT_ADAPTER
from router.wire.openai_chat.view import ChatConversation, messages_with
from router.core.results import REWRITES


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def assistant(text: str | None = None, calls: list[tuple[str, str, str]] | None = None) -> dict[str, Any]:
    """An assistant message; ``calls`` are (id, tool name, arguments JSON)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}} for cid, name, args in calls
        ]
    return message


def tool(call_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content, **extra}


def tool_output(topic: str, chars: int = 4000) -> str:
    """A tool result of exactly ``chars`` characters, in lines naming ``topic``."""
    line = f"{topic}: output line\n"
    return (line * (chars // len(line) + 1))[:chars]


def agent_session(results: int = 4, chars: int = 4000, task: str = "Make the parser tests pass.") -> list[dict[str, Any]]:
    """An agent session: a system prompt, the task, then per turn an assistant call (``call_<i>``,
    ``bash``) and its tool result of ``chars`` characters; the last result is the in-progress turn."""
    messages = [system("You are a coding agent."), user(task)]
    for i in range(results):
        messages += [assistant(f"Step {i}.", [(f"call_{i}", "bash", f'{{"cmd": "step {i}"}}')]), tool(f"call_{i}", tool_output(f"r{i}", chars))]
    return messages


def image_part(url: str = "data:image/png;base64,AAAA") -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def make_ctx(
    body: dict[str, Any] | None = None, headers: dict[str, str] | None = None, *, messages: list[dict[str, Any]] | None = None
) -> RequestContext:
    """A RequestContext as the edge builds it, for driving stages directly."""
    if body is None:
        body = {"model": "auto", "messages": messages if messages is not None else [user("hello")]}
    request = make_mocked_request("POST", "/v1/chat/completions", headers=headers or {})
    view = chat_request_view(body)
    return RequestContext(
        request_id="req_test",
        received_at=time.time(),
        started=time.perf_counter(),
        headers=CIMultiDictProxy(CIMultiDict(headers or {})),
        body=body,
        view=view,
        wire=OPENAI_CHAT_ADAPTER,
        client=request,
    )


def chat_request_view(body: dict[str, Any]) -> RequestView:
    """The neutral view the OpenAI chat adapter builds of ``body`` (which must be valid)."""
    view = OPENAI_CHAT_ADAPTER.parse(body, 2000)
    assert not isinstance(view, ApiError), view
    return view


def sent_messages(ctx: RequestContext) -> list[dict[str, Any]]:
    """The chat messages upstream-forward would send for ``ctx``: its messages with pinch's rewrites."""
    conversation = ctx.view.conversation
    assert isinstance(conversation, ChatConversation)
    return messages_with(conversation.messages, conversation.result_units(), ctx[REWRITES] or {})


def decision_row(**fields: Any) -> dict[str, Any]:
    """A /v1/decisions row as the proxy returns it (a routed, answered request)."""
    row: dict[str, Any] = {
        "request_id": "req_0123456789abcdef01234567",
        "ts": datetime(2025, 3, 4, 14, 3, 7, tzinfo=UTC).timestamp(),
        "status": 200,
        "duration_ms": 1234.5,
        "error_code": None,
        "session": "a1b2c3d4e5f60718",
        "session_source": "header",
        "requested_model": "auto",
        "stream": True,
        "category": "debugging",
        "tier": 2,
        "source": "classifier",
        "routed_tier": 2,
        "escalation": "",
        "model": "main",
        "provider": "mock",
        "candidates": ["main", "backup"],
        "attempts": [{"model": "main", "provider": "mock", "status": 200, "error": ""}],
        "rejected": [{"model": "no-tools", "reasons": ["does not support tools"]}],
        "pinch_mode": "uniform",
        "tokens_before": 50_000,
        "tokens_after": 20_000,
        "pinch_compressed": 7,
        "relevance_status": "unavailable",
        "relevance_reason": "connection refused",
        "stages": [
            {"stage": "session-fingerprint", "outcome": "ok", "ms": 0.02, "detail": "header"},
            {"stage": "classifier", "outcome": "fallback", "ms": 1.5, "detail": "ClientConnectorError: refused"},
            {"stage": "capability-gate", "outcome": "ok", "ms": 0.1, "detail": "main (tier 2, 2 candidates)"},
        ],
        "upstream_status": 200,
        "first_byte_ms": 120.0,
        "upstream_ms": 1200.0,
        "prompt_tokens": 20_000,
        "completion_tokens": 30,
        "total_tokens": 20_030,
        "overhead_ms": 2.25,
        "stream_error": "",
        "outcome": None,
        "outcome_reason": None,
        "outcome_ts": None,
    }
    row.update(fields)
    return row
