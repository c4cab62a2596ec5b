"""The same content as a request of every client wire: chat, Anthropic Messages, Responses, Gemini.

A chat body (bench_proxy's ``--pin`` bodies) is written in each other wire's own shape with what
the proxy's translations already know of them (:mod:`router.translate`), so that a wire's cost
can be told apart from its content's: system text, user and assistant turns, tool calls and
their results, the tools offered. Each is what that wire's agents send (Claude Code's
``max_tokens``, Codex's input items, gemini-cli's ``contents``) and no more.
"""

from __future__ import annotations

from typing import Any

from router.translate.chat_to_gemini import chat_to_gemini_body
from router.translate.chat_to_messages import chat_to_messages_body

WIRES = ("chat", "messages", "responses", "gemini")
PATHS = {
    "chat": "/v1/chat/completions",
    "messages": "/v1/messages",
    "responses": "/v1/responses",
}
MAX_TOKENS = 4096  # what the Messages wire requires; the others are sent the same limit


def path_of(wire: str, model: str = "auto") -> str:
    """The path a client of ``wire`` posts to (Gemini names the model in it)."""
    return PATHS[wire] if wire != "gemini" else f"/v1beta/models/{model}:generateContent"


def as_wire(chat: dict[str, Any], wire: str) -> dict[str, Any]:
    """``chat`` (a chat-completions body) as a body of ``wire`` with the same content."""
    model = chat.get("model", "auto")
    if wire == "chat":
        return {**chat, "max_tokens": MAX_TOKENS}
    if wire == "messages":
        body = chat_to_messages_body(chat, model, MAX_TOKENS)
        return {"model": model, **{k: v for k, v in body.items() if k != "model"}}
    if wire == "gemini":
        body = chat_to_gemini_body(chat)
        body.setdefault("generationConfig", {})["maxOutputTokens"] = MAX_TOKENS
        return body
    if wire == "responses":
        return chat_to_responses_body(chat)
    raise ValueError(f"no wire {wire!r}")


def chat_to_responses_body(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat body as a Responses body: system → ``instructions``, turns → input items, as Codex sends them."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in chat["messages"]:
        role, content = message["role"], message.get("content")
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
        if role in ("system", "developer") and not items:
            instructions.append(text)
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"], "output": text})
        else:
            if text:
                part = "output_text" if role == "assistant" else "input_text"
                items.append({"type": "message", "role": role, "content": [{"type": part, "text": text}]})
            for call in message.get("tool_calls") or []:
                function = call["function"]
                items.append({"type": "function_call", "call_id": call["id"], "name": function["name"], "arguments": function["arguments"]})
    body: dict[str, Any] = {"model": chat.get("model", "auto"), "input": items, "max_output_tokens": MAX_TOKENS}
    if instructions:
        body["instructions"] = "\n\n".join(instructions)
    tools = [t["function"] for t in chat.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    if tools:
        body["tools"] = [{"type": "function", **tool} for tool in tools]
    return body
