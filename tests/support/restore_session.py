"""A session for the restore tests (issue #26): the agent viewed a file first, ran noisy commands, and its
newest step may point at the file again."""

from __future__ import annotations

from typing import Any

FILE_VIEW = "\n".join(f"def handler_{i}(request): return render_page_{i}(request)" for i in range(60))  # src/app/views.py
NOISE = ["\n".join(f"collected test item {t}-{i} passed" for i in range(60)) for t in range(5)]


def call(call_id: str, command: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": f'{{"command": "{command}"}}'}}]}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def history(last_step: str) -> list[dict[str, Any]]:
    """The agent viewed src/app/views.py first, then ran five noisy commands; its newest step is ``last_step``."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the 500 on the home page"}]
    messages += [call("view", "cat src/app/views.py"), result("view", FILE_VIEW)]
    for n, text in enumerate(NOISE):
        messages += [call(f"run{n}", f"pytest -q tests/run_{n}"), result(f"run{n}", text)]
    return [*messages, call("last", last_step), result("last", "ok")]
