"""When does compressing beyond the budget pay? The provider's prompt cache decides. Pure.

A provider bills (or, on a local server, prefills) only what follows the first
byte that changed since the session's previous request; the unchanged prefix
is read from its cache. Compressing an old tool result changes the prompt from
that result on, so a rewrite is paid for on the spot (everything after it is
written to the cache again) and saves a little on every later request. Pinch's
budget is therefore soft, and going beyond it is worth a rewrite only when:

* the provider caches nothing (``cache_lifetime_seconds: 0``): every token is
  paid on every request, so fewer tokens is always cheaper;
* the session's cache is **cold** anyway: the provider never saw this session
  (its first request, or the proxy lost the session's state), the previous
  request went to another provider, or the session has been idle longer than
  the provider keeps a prefix (``cache_lifetime_seconds``; defaults per ``api``
  in :data:`DEFAULT_CACHE_LIFETIME_SECONDS`). The whole prompt is written
  afresh then whatever pinch does, so compressing costs nothing extra;
* or, with a **warm** cache, the saving over the expected rest of the session
  covers the rewrite (:func:`rewrite_pays`).

The model's context window is not part of this: it is a hard limit, and pinch
compresses as far as it must to fit it whatever the cache (see
:mod:`router.core.pinch_ledger`).
"""

from __future__ import annotations

import enum

from router.core.frozen import frozen

# How long a provider keeps a cached prefix after the last request that used it, by `api`.
# Anthropic: 5 minutes unless refreshed; OpenAI: 5-10 minutes of inactivity (up to an hour
# off-peak), so 5 is the safe end; Ollama unloads an idle model (and its KV cache) after its
# default keep_alive of 5 minutes, and llama.cpp's slots are reused by other sessions meanwhile;
# Gemini's implicit cache keeps a prefix for "a short amount of time" (undocumented): 5 as well.
DEFAULT_CACHE_LIFETIME_SECONDS: dict[str, float] = {"anthropic": 300.0, "openai": 300.0, "ollama": 300.0, "gemini": 300.0}
UNKNOWN_API_LIFETIME_SECONDS = 300.0

# Anthropic's input-price multipliers (the dearest rewrite of the common providers): a token
# read from the cache costs 0.1x, a token written to it 1.25x. OpenAI has no write premium
# and dearer reads, so a rewrite that pays here pays there too.
CACHE_READ_COST = 0.1
CACHE_WRITE_COST = 1.25
# A warm rewrite must pay for itself within this many requests. How long a session will go on
# is unknown; replaying the shared transcripts, counting on more let warm rewrites raise the
# tokens the model prefills by up to 1.8x for a cost saving (README, Pinch).
PAYBACK_REQUESTS = 5


def cache_lifetime(api: str, configured: float | None) -> float:
    """The provider's cache lifetime in seconds: its configured value, else its ``api``'s default; 0 = no cache."""
    if configured is not None:
        return configured
    return DEFAULT_CACHE_LIFETIME_SECONDS.get(api, UNKNOWN_API_LIFETIME_SECONDS)


class CacheVerdict(enum.StrEnum):
    WARM = "warm"  # the provider most likely still holds the previous request's prefix
    COLD = "cold"  # it does not: this request is written afresh anyway
    NONE = "none"  # the provider caches nothing


@frozen
class CacheState:
    """What pinch assumes about the session's prompt cache at this request, and why.

    ``requests`` is how many requests of the session pinch has seen before this
    one: a session that has run that long is expected to run about as long again.
    """

    verdict: CacheVerdict
    reason: str
    requests: int = 0


def cache_state(
    *,
    now: float,
    last_seen: float | None,
    last_provider: str | None,
    provider: str | None,
    lifetime_seconds: float,
    requests: int,
) -> CacheState:
    """The session's cache state for a request to ``provider`` at ``now``.

    ``last_seen`` / ``last_provider``: when the session's previous request was
    made and where it was meant to go (None: no previous request is known).
    """
    if lifetime_seconds <= 0:
        return CacheState(CacheVerdict.NONE, "provider caches nothing", requests)
    if last_seen is None:
        return CacheState(CacheVerdict.COLD, "cache cold (new session)", requests)
    if provider is not None and last_provider is not None and provider != last_provider:
        return CacheState(CacheVerdict.COLD, f"cache cold (previous request went to {last_provider})", requests)
    idle = now - last_seen
    if idle > lifetime_seconds:
        return CacheState(CacheVerdict.COLD, f"cache cold (idle {idle:.0f}s > {lifetime_seconds:g}s)", requests)
    return CacheState(CacheVerdict.WARM, f"warm cache (idle {idle:.0f}s <= {lifetime_seconds:g}s)", requests)


def rewrite_pays(saved_tokens: int, rewritten_tokens: int, expected_requests: int) -> bool:
    """Does compressing pay with a warm cache?

    The rewrite makes ``rewritten_tokens`` that would have been cache reads into
    cache writes now, and saves ``saved_tokens`` cache reads on this request and
    on each of the ``expected_requests`` still to come, counted up to
    :data:`PAYBACK_REQUESTS`: ``saved × read × (expected + 1) >= rewritten × (write − read)``.
    """
    horizon = min(expected_requests, PAYBACK_REQUESTS) + 1
    return saved_tokens * CACHE_READ_COST * horizon >= rewritten_tokens * (CACHE_WRITE_COST - CACHE_READ_COST)
