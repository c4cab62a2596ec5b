"""Usage reports as providers write them, in every wire format's shape and their mixes. Pure.

One reader for all of them, because compatible servers mix the shapes (Anthropic's cache fields
inside an OpenAI-shaped usage, DeepSeek's own cache field): each wire adapter reads its answers'
usage with it, and the stream relay each event's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from router.core.json_body import loads
from router.core.redaction import quoted
from router.core.results import Usage


def read_usage(data: bytes) -> Usage | None:
    """Usage from one JSON body (a chat completion or one stream chunk), if it has one.

    Reads both shapes of cache accounting: OpenAI's ``prompt_tokens`` with
    ``prompt_tokens_details.cached_tokens``, and Anthropic's ``input_tokens``
    (which leaves out the cached part) with ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens`` — also inside an OpenAI-shaped usage, as
    some compatible servers send them — plus DeepSeek's
    ``prompt_cache_hit_tokens``. Anthropic's stream carries its usage in
    ``message_start``'s ``message``, the Responses API in ``response`` (its
    ``input_tokens`` include the cached ``input_tokens_details.cached_tokens``);
    those are read too.
    """
    try:
        obj = loads(data)  # the Responses API's last event echoes the request, numbers as written
    except ValueError:
        return None
    return usage_of(obj)


def usage_of(obj: Any) -> Usage | None:
    """:func:`read_usage` of a body already parsed (a whole answer the proxy has parsed anyway)."""
    if not isinstance(obj, dict):
        return None
    usage = obj.get("usage")
    if not isinstance(usage, dict):
        # Anthropic's message_start carries it in ``message``, a Responses event in ``response``
        holder = obj.get("message") if isinstance(obj.get("message"), dict) else obj.get("response")
        usage = holder.get("usage") if isinstance(holder, dict) else None
        if not isinstance(usage, dict):
            return None
    return _usage(usage)


def _usage(usage: dict[str, Any]) -> Usage:
    details = usage.get("prompt_tokens_details")
    if not isinstance(details, dict):
        details = usage.get("input_tokens_details")  # the Responses API's name for it
    get = usage.get
    cached = token_count(details.get("cached_tokens")) if isinstance(details, dict) else None
    cache_read, cache_write = token_count(get("cache_read_input_tokens")), token_count(get("cache_creation_input_tokens"))
    if cached is None:
        cached = cache_read if cache_read is not None else token_count(get("prompt_cache_hit_tokens"))
    prompt, completion, total = token_count(get("prompt_tokens")), token_count(get("completion_tokens")), token_count(get("total_tokens"))
    if prompt is None:
        uncached_input = token_count(get("input_tokens"))
        if uncached_input is not None:
            # Anthropic's shape: input_tokens counts only what was neither read from nor written to the cache
            prompt = uncached_input + (cache_read or 0) + (cache_write or 0)
    if completion is None:
        completion = token_count(get("output_tokens"))
    return Usage(prompt, completion, total, cached, cache_write)


def token_count(value: Any) -> int | None:
    """``value`` when it is a token count as a usage report states one: a whole number, not negative
    (a bool is not one); else None. Every wire's usage reader takes its counts through it."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def usage_problem(usage: Any, counts: Iterable[str], where: str = "usage") -> str | None:
    """What makes a provider's usage report (``where`` in its answer; "": the answer itself holds
    the counts, as Ollama's does) none, or None: absent, or an
    object whose ``counts`` are each absent, null or a token count (:func:`token_count`). A count of
    another type (``"3"``) is no report a translation may read as nothing: the answer is malformed."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        return f"its {where} is no object"
    for name in counts:
        value = usage.get(name)
        if value is not None and token_count(value) is None:
            return f"its {f'{where}.' if where else ''}{name} is no token count ({quoted(value)})"
    return None
