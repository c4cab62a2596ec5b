"""Small builders of plain test data."""

from __future__ import annotations

import time
from typing import Any

from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict, CIMultiDictProxy

from router.context import RequestContext
from router.core.chat_view import ChatConversation, messages_with
from router.core.request_view import RequestView
from router.errors import ApiError
from router.wire.openai_chat import OPENAI_CHAT_ADAPTER


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
    return messages_with(conversation.messages, conversation.result_units(), ctx.rewrites or {})
