"""Small builders of Gemini API bodies, shaped like Gemini CLI's and the google-genai SDK's, and a config with
a Gemini and a chat provider on one mock."""

from __future__ import annotations

from typing import Any

from router.config import Config
from tests.support.config import make_config, model_entry

LIST_DIRECTORY = {
    "name": "list_directory",
    "description": "Lists a directory.",
    "parametersJsonSchema": {"type": "object", "properties": {"dir_path": {"type": "string"}}, "required": ["dir_path"]},
}
TOOLS = [{"functionDeclarations": [LIST_DIRECTORY]}]


def user(*parts: str | dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": p} if isinstance(p, str) else p for p in parts]}


def model(*parts: str | dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": [{"text": p} if isinstance(p, str) else p for p in parts]}


def call(name: str = "list_directory", call_id: str | None = "call_1", signature: str | None = None, **args: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {**({"id": call_id} if call_id else {}), "name": name, "args": args or {"dir_path": "."}}}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def response(output: Any, name: str = "list_directory", call_id: str | None = "call_1") -> dict[str, Any]:
    return {"functionResponse": {**({"id": call_id} if call_id else {}), "name": name, "response": output if isinstance(output, dict) else {"output": output}}}


def gemini_body(*contents: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"contents": list(contents) or [user("hi")], **extra}


def gemini_and_chat_config(url: str, **sections: Any) -> Config:
    """``gem-main`` behind an ``api: gemini`` provider and ``chat-main`` behind an OpenAI-compatible one, on the mock at ``url``."""
    providers = {"mock-gemini": {"base_url": url, "api": "gemini", "api_key_env": "MOCK_PROVIDER_KEY"}, "mock": {"base_url": url}}
    models = [model_entry("gem-main", provider="mock-gemini", upstream_model="gemini-mock", supports={"tools": True, "vision": True, "json_mode": True}),
              model_entry("chat-main", supports={"tools": True, "vision": True, "json_mode": True})]
    return make_config(url, providers=providers, models=models, **sections)
