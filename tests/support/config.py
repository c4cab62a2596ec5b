"""Small valid configs and bodies for tests: a catalogue entry, a config pointing at one upstream, a chat body."""

from __future__ import annotations

from typing import Any

from router.config import Config, parse_config


def model_entry(name: str, **overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "provider": "mock",
        "upstream_model": f"up-{name}",
        "context_window": 32_000,
        "max_output_tokens": 4_000,
        "supports": {"tools": True, "vision": False, "json_mode": True},
        "tool_proficiency": 0.6,
        "tiers": [1, 2, 3],
        "quality": 0.5,
    }
    entry.update(overrides)
    return entry


def make_config(upstream_url: str = "http://127.0.0.1:9/v1", **sections: Any) -> Config:
    """A valid config pointing at ``upstream_url``; keyword sections replace defaults."""
    raw: dict[str, Any] = {
        "middlewares": ["session-fingerprint", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": upstream_url}},
        "models": [model_entry("main")],
        # Generous: on a loaded 2-core machine (two suites at once) a loopback connect or a mock's answer
        # waited 2-5 s for the event loop now and then, and a request answered 504. A test of a timeout sets its own.
        "upstream": {"connect_timeout_seconds": 10, "first_byte_timeout_seconds": 30, "idle_timeout_seconds": 30},
        "decision_log": {"path": ":memory:"},
    }
    raw.update(sections)
    return parse_config(raw, environ={})


def chat_body(text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "auto", "messages": [{"role": "user", "content": text}], **extra}
