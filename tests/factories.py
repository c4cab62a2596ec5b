"""Small builders of plain test data."""

from __future__ import annotations

import time
from typing import Any

from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict, CIMultiDictProxy

from router.context import RequestContext
from router.core.turn_text import extract_turn_text


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


def image_part(url: str = "data:image/png;base64,AAAA") -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def make_ctx(
    body: dict[str, Any] | None = None, headers: dict[str, str] | None = None, *, messages: list[dict[str, Any]] | None = None
) -> RequestContext:
    """A RequestContext as the edge builds it, for driving stages directly."""
    if body is None:
        body = {"model": "auto", "messages": messages if messages is not None else [user("hello")]}
    messages = body["messages"]
    request = make_mocked_request("POST", "/v1/chat/completions", headers=headers or {})
    return RequestContext(
        request_id="req_test",
        received_at=time.time(),
        started=time.perf_counter(),
        headers=CIMultiDictProxy(CIMultiDict(headers or {})),
        body=body,
        messages=messages,
        turn_text=extract_turn_text(messages, 2000),
        requested_model=body.get("model"),
        stream=bool(body.get("stream")),
        client=request,
        send_messages=messages,
    )
