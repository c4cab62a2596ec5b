"""Restore when it is free (issue #26; ``pinch.relevance.restore``, off by default since #49): with it on, a
result the ledger compressed comes back verbatim at a cold-cache moment when the relevance ranking wants it
and the budget allows; with a warm cache it stays compressed. Off, a cold moment reapplies the ledger."""

from __future__ import annotations

from typing import Any

from router.core.cache_timing import CacheState, CacheVerdict
from router.core.content import content_text
from router.core.pinch_ledger import EMPTY_LEDGER, Ledger
from router.core.relevance import rank_with_evidence
from router.core.turns import candidate_results
from router.wire.openai_chat.pinch import pinch_session
from router.wire.openai_chat.view import ChatConversation, extract_turn_text
from tests.support.restore_session import FILE_VIEW, history

KEEP = 2
MAX_CHARS = 400


def ranked(messages: list[dict[str, Any]]) -> list[int]:
    conversation = ChatConversation(messages)
    results = conversation.tool_results()
    candidates = candidate_results(conversation, KEEP)
    texts = [content_text(results[p].content) for p in candidates]
    others = [content_text(r.content) for i, r in enumerate(results) if i not in set(candidates)]
    return list(rank_with_evidence(texts, others, extract_turn_text(messages, 2000), MAX_CHARS).order)


def pinch(messages: list[dict[str, Any]], ledger: Ledger, verdict: CacheVerdict, budget: int, *, restore: bool = True) -> Any:
    return pinch_session(
        messages,
        ledger,
        cache=CacheState(verdict, str(verdict), requests=5),
        budget_tokens=budget,
        keep_last_turns=KEEP,
        max_summarize_chars=MAX_CHARS,
        relevance_order=ranked(messages),
        restore=restore,
    )


def compressed_view() -> tuple[Ledger, list[dict[str, Any]]]:
    """A session whose first batch (nothing points at the file view yet) compressed the file view."""
    first = history("ls docs")
    done = pinch(first, EMPTY_LEDGER, CacheVerdict.COLD, budget=700)
    assert done.messages[3]["content"] != FILE_VIEW, "set-up: the file view was compressed"
    assert done.ledger.holds(first[3], 3)
    # the agent now points at the file again: it edits a function that only the old view shows
    again = history("sed -i s/render_page_7/render_home/ src/app/views.py && grep -n handler_7 src/app/views.py")
    return done.ledger, again


def test_a_compressed_file_view_referenced_again_comes_back_verbatim_when_the_cache_goes_cold() -> None:
    ledger, again = compressed_view()
    budget = 3200  # room for the view once the noise is compressed
    done = pinch(again, ledger, CacheVerdict.COLD, budget)
    assert done.messages[3]["content"] == FILE_VIEW
    assert done.stats.restored == 1 and "1 restored" in done.stats.reason
    assert not done.ledger.holds(again[3], 3)  # out of the ledger: the next warm request keeps it verbatim
    later = pinch(again, done.ledger, CacheVerdict.WARM, budget)
    assert later.messages[3]["content"] == FILE_VIEW and later.stats.restored == 0


def test_with_a_warm_cache_the_compressed_file_view_stays_compressed() -> None:
    ledger, again = compressed_view()
    done = pinch(again, ledger, CacheVerdict.WARM, 3200)
    assert done.messages[3]["content"] != FILE_VIEW
    assert done.stats.restored == 0 and done.ledger.holds(again[3], 3)


def test_a_provider_that_caches_nothing_restores_nothing() -> None:
    # every request there is a cold moment: re-planning each one would churn the prompt (docs/relevance.md)
    ledger, again = compressed_view()
    done = pinch(again, ledger, CacheVerdict.NONE, 3200)
    assert done.messages[3]["content"] != FILE_VIEW and done.stats.restored == 0
    assert done.ledger.holds(again[3], 3)


def test_the_budget_decides_a_view_too_large_to_fit_stays_compressed() -> None:
    ledger, again = compressed_view()
    done = pinch(again, ledger, CacheVerdict.COLD, 400)
    assert done.messages[3]["content"] != FILE_VIEW and done.stats.restored == 0


def test_with_restore_off_the_default_a_cold_moment_resends_the_ledger_as_it_was() -> None:
    ledger, again = compressed_view()
    compressed = pinch(again, ledger, CacheVerdict.WARM, 3200).messages[3]["content"]
    done = pinch_session(
        again,
        ledger,
        cache=CacheState(CacheVerdict.COLD, "cold", requests=5),
        budget_tokens=3200,
        keep_last_turns=KEEP,
        max_summarize_chars=MAX_CHARS,
        relevance_order=ranked(again),
    )
    assert done.messages[3]["content"] == compressed != FILE_VIEW
    assert done.stats.restored == 0 and done.ledger.holds(again[3], 3)
