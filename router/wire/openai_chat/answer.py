"""A whole chat-completions answer, as OpenAI's API writes one. Pure.

Every translation that makes a chat completion (from Anthropic's ``message``, from Ollama's native
answer) and the mock upstream build it here, so each has what the spec requires
(``CreateChatCompletionResponse``): ``choices[].logprobs`` and ``choices[].message.refusal``, which
OpenAI sends as ``null`` when there are none.
"""

from __future__ import annotations

from typing import Any


def chat_completion(completion_id: str, created: int, model: Any, message: dict[str, Any], finish_reason: str, usage: dict[str, Any] | None) -> dict[str, Any]:
    """One choice's answer; ``message`` is the assistant's (``refusal`` null unless it has one); no ``usage`` key when None."""
    answer: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": {**message, "refusal": message.get("refusal")}, "logprobs": None, "finish_reason": finish_reason}],
    }
    if usage is not None:
        answer["usage"] = usage
    return answer
