"""What of the client's body the upstream gets changed, besides ``model`` and ``messages``. Pure.

Three fields, each only when there is a reason:

* the output limit (``max_completion_tokens`` / ``max_tokens``, whichever the
  client sent) is lowered to what the candidate can give (see
  :func:`router.core.routing.output_tokens_to_send`);
* a stream whose client did not ask for ``stream_options.include_usage`` asks
  for it anyway, so the decision log knows the token counts; the relay then
  drops the usage-only chunk (:func:`is_usage_only_event`) so the client sees
  exactly the stream it asked for;
* ``prompt_cache_key``, set to the session key for a provider with
  ``set_prompt_cache_key`` when the client sent none (OpenAI routes its prompt
  cache by it), never replacing the client's.

Everything else passes through untouched (WHAT-USERS-HIT #8, #10).
"""

from __future__ import annotations

from typing import Any

OUTPUT_LIMIT_KEYS = ("max_completion_tokens", "max_tokens")


def usage_must_be_injected(body: dict[str, Any]) -> bool:
    """A stream whose client did not ask for the usage chunk."""
    if body.get("stream") is not True:
        return False
    options = body.get("stream_options")
    return not (isinstance(options, dict) and options.get("include_usage") is True)


def upstream_body(
    body: dict[str, Any], output_tokens: int | None, inject_usage: bool, prompt_cache_key: str | None = None
) -> dict[str, Any]:
    """``body`` with the output limit lowered to ``output_tokens``, the usage chunk asked for, and
    ``prompt_cache_key`` set (the session key, for a provider with ``set_prompt_cache_key``) when
    the client sent none — the client's own is never replaced; ``body`` itself (not a copy) when
    nothing changes."""
    changes: dict[str, Any] = {}
    if prompt_cache_key is not None and "prompt_cache_key" not in body:
        changes["prompt_cache_key"] = prompt_cache_key
    if output_tokens is not None:
        for key in OUTPUT_LIMIT_KEYS:
            value = body.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > output_tokens:
                changes[key] = output_tokens
    if inject_usage:
        options = body.get("stream_options")
        changes["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return {**body, **changes} if changes else body
