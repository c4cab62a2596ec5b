"""Small builders of Anthropic Messages data, shaped like what Claude Code sends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

AGENTS = Path(__file__).resolve().parents[1] / "data" / "agents"
SIGNATURE = "Reb28ANuRzxNxvaJb6Vcea5EXPHGDkA2rfJ228hAX+VF5vbwA25HPE3G9olvpVx5rkRc8cYOQDat8nbbyEBf5Q=="
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def captured(name: str) -> dict[str, Any]:
    """One captured Claude Code request (``claude-code/0004-POST-v1-messages.json``): path, headers, body."""
    return json.loads((AGENTS / name).read_text())


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


def image(data: str = PNG, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def thinking(value: str = "I will call Bash.", signature: str = SIGNATURE) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def tool_use(call_id: str, name: str = "Bash", **input_: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": input_ or {"command": "ls"}}


def tool_result(call_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": blocks[0] if len(blocks) == 1 and isinstance(blocks[0], str) else list(blocks)}


def assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": blocks[0] if len(blocks) == 1 and isinstance(blocks[0], str) else list(blocks)}


def reminder(value: str = "Today's date is 2026-12-01.") -> dict[str, Any]:
    return text(f"<system-reminder>\n{value}\n</system-reminder>")


BILLING = text("x-anthropic-billing-header: cc_version=2.1.332.4a6; cc_entrypoint=sdk-cli;")
BASH = {"name": "Bash", "description": "Run a shell command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}


def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A Messages body like Claude Code's: billing line + cached system block, Bash, max_tokens 128000."""
    out: dict[str, Any] = {
        "model": "claude-opus-5-5",
        "messages": list(messages) or [user("list the files")],
        "system": [BILLING, text("You are a Claude agent.", cache_control={"type": "ephemeral"})],
        "tools": [BASH],
        "max_tokens": 128000,
    }
    out.update(extra)
    return out


SUPPORTS = {"tools": True, "vision": True, "json_mode": True}


def two_wire_config(url: str, anthropic_url: str | None = None, reasoning_content: bool = False, thinking_off: str = "omit", **sections: Any) -> Any:
    """The proxy on one mock (``url`` ends in /v1) speaking both APIs: ``claude-main`` behind an
    ``api: anthropic`` provider (``thinking_off``: its models[].thinking_off), ``chat-main`` behind an
    OpenAI-compatible one, ``plain`` (no tools) too; both keyed by MOCK_PROVIDER_KEY; clients need ``local-key``."""
    from tests.support.config import make_config, model_entry
    return make_config(
        url,
        providers={
            "anth": {"base_url": anthropic_url or url.removesuffix("/v1"), "api": "anthropic", "api_key_env": "MOCK_PROVIDER_KEY"},
            "chat": {"base_url": url, "api_key_env": "MOCK_PROVIDER_KEY"},
        },
        models=[
            model_entry("claude-main", provider="anth", upstream_model="claude-up", supports=SUPPORTS, max_output_tokens=64000, context_window=200000,
                        thinking_off=thinking_off),
            model_entry("chat-main", provider="chat", upstream_model="chat-up", supports=SUPPORTS, context_window=200000, reasoning_content=reasoning_content),
            model_entry("plain", provider="chat", supports={}),
        ],
        server={"api_keys": ["local-key"], **sections.pop("server", {})},
        **sections,
    )


def streamed_message(raw: bytes) -> dict[str, Any]:
    """The ``message`` an Anthropic stream carries, reassembled as a client does (thinking with its
    signature, text, ``tool_use`` input from its JSON fragments)."""
    message: dict[str, Any] = {}
    partial: dict[int, str] = {}
    for line in raw.decode().splitlines():
        if not line.startswith("data: "):
            continue
        event = json.loads(line[6:])
        kind = event["type"]
        if kind == "message_start":
            message = {**event["message"], "content": []}
        elif kind == "content_block_start":
            message["content"].append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            block, delta = message["content"][event["index"]], event["delta"]
            if delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
        elif kind == "content_block_stop" and event["index"] in partial:
            message["content"][event["index"]]["input"] = json.loads(partial.pop(event["index"]))
        elif kind == "message_delta":
            message.update(event["delta"])
    return message
