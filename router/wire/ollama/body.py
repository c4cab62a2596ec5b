"""The body an Ollama request becomes upstream: the client's, with only the chain's changes. Pure.

No provider speaks the client wire itself (a provider's native ``/api/chat`` is a wire of its own,
:data:`router.wire.ollama.answers.OLLAMA_CHAT`), so the body is always a translation's source: the
client's body with ``model`` the chosen upstream model, ``stream`` said (Ollama's default is to
stream), ``options.num_predict`` lowered to what the candidate can give and pinch's rewrites in the
messages. A ``/api/generate`` request's source also has its ``messages`` (its system and prompt, with
its images) and keeps its ``prompt``, by which the translation knows to answer in generate's shape;
a chat's source has no ``prompt``.
"""

from __future__ import annotations

from typing import Any

from router.core.request_view import BodyChanges, RequestView, rewritten_array
from router.wire.ollama.view import OllamaConversation
from router.wire.openai_chat.retrieve import with_tool


def within_output_limit(options: Any, output_tokens: int | None) -> Any:
    """``options`` with ``num_predict`` lowered to ``output_tokens`` (never raised, never added); the same object when unchanged."""
    if output_tokens is None or not isinstance(options, dict):
        return options
    limit = options.get("num_predict")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > output_tokens:
        return {**options, "num_predict": output_tokens}
    return options


def translation_source(body: dict[str, Any], view: RequestView, changes: BodyChanges) -> dict[str, Any]:
    """The client's body with the chain's changes, not serialised (see the module doc); ``body`` unchanged."""
    conversation = view.conversation
    assert isinstance(conversation, OllamaConversation)
    source = {key: value for key, value in body.items() if conversation.generate or key != "prompt"}
    messages, units = conversation.messages, conversation.result_units()
    source["messages"] = rewritten_array(changes, messages, units.__getitem__, conversation.messages_with)
    source["model"] = changes.upstream_model
    source["stream"] = view.stream
    if "options" in body:
        source["options"] = within_output_limit(body["options"], changes.output_tokens)
    return source if changes.tool is None else with_tool(source, changes.tool)  # Ollama declares tools as chat does
