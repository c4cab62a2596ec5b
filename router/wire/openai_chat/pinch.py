"""Pinch over a list of OpenAI chat messages: what transcripts, ``eval-pinch`` and the benchmarks use.

The chain pinches any wire format's conversation (:func:`router.core.pinch.prune_results`,
:func:`router.core.pinch_ledger.pinch_conversation`); these take chat messages in and give chat
messages back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from router.core.content import Message
from router.core.pinch import measure_against_budget, prune_measured
from router.core.cache_timing import CacheState
from router.core.pinch_ledger import Ledger, PinchPolicy, SessionPinch, pinch_conversation
from router.core.request_view import units_with
from router.core.results import PinchStats
from router.core.tokens import (
    DEFAULT_ESTIMATOR,
    PromptSize,
    TokenEstimator,
)
from router.wire.openai_chat.view import ChatConversation, messages_with


def prune_context(
    messages: list[Message],
    budget_tokens: int,
    keep_last_turns: int,
    max_summarize_chars: int,
    relevance_order: Sequence[int] | None = None,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
    *,
    tools: Any = None,
    measured: PromptSize | None = None,
) -> tuple[list[Message], PinchStats]:
    """:func:`prune_results` on OpenAI chat messages: the messages to send and exact stats."""
    # prune_results' first steps on the messages themselves: a prompt within budget builds no conversation
    measured, within = measure_against_budget(
        messages, budget_tokens, keep_last_turns, max_summarize_chars, estimator, tools, measured
    )
    if within is not None:
        return messages, within
    conversation = ChatConversation(messages)
    rewrites, stats = prune_measured(conversation, measured, budget_tokens, keep_last_turns, max_summarize_chars, relevance_order)
    return (units_with(messages, conversation.result_units(), rewrites, "content") if rewrites else messages), stats


def tool_name_for(messages: list[Message], index: int) -> str:
    """The tool that produced chat message ``messages[index]``, for its placeholder
    (:meth:`~router.wire.openai_chat.view.ChatConversation.tool_name`)."""
    return ChatConversation(messages).tool_name(index)


POLICY_FIELDS = frozenset(f.name for f in fields(PinchPolicy))


def pinch_session(messages: list[Message], ledger: Ledger, *, cache: CacheState, **settings: Any) -> SessionPinch:
    """:func:`pinch_conversation` on OpenAI chat messages, its :class:`PinchPolicy` given by keyword
    beside the other options: the messages to send (the very same list when none changes), exact
    stats and the session's new ledger."""
    conversation = ChatConversation(messages)
    policy = PinchPolicy(**{k: v for k, v in settings.items() if k in POLICY_FIELDS})
    options = {k: v for k, v in settings.items() if k not in POLICY_FIELDS}
    done = pinch_conversation(conversation, ledger, policy, cache, **options)
    sent = messages_with(messages, conversation.result_units(), done.rewrites) if done.rewrites else messages
    return SessionPinch(sent, done.stats, done.ledger)
