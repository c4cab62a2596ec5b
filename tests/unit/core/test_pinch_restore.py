"""Restore when it is free (issue #26): a result the ledger compressed comes back verbatim at a cold-cache
moment when the relevance ranking wants it and the budget allows; with a warm cache it stays compressed."""

from __future__ import annotations

from typing import Any

from router.core.cache_timing import CacheState, CacheVerdict
from router.core.content import content_text
from router.core.pinch_ledger import EMPTY_LEDGER, Ledger
from router.core.relevance import rank_results
from router.core.turns import candidate_results
from router.wire.openai_chat.pinch import pinch_session
from router.wire.openai_chat.view import ChatConversation, extract_turn_text

KEEP = 2
MAX_CHARS = 400
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


def ranked(messages: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    conversation = ChatConversation(messages)
    results = conversation.tool_results()
    candidates = candidate_results(conversation, KEEP)
    texts = [content_text(results[p].content) for p in candidates]
    others = [content_text(r.content) for i, r in enumerate(results) if i not in set(candidates)]
    ranking = rank_results(texts, others, extract_turn_text(messages, 2000), MAX_CHARS)
    return list(ranking.order), sorted(ranking.pointed)


def pinch(messages: list[dict[str, Any]], ledger: Ledger, verdict: CacheVerdict, budget: int) -> Any:
    order, pointed = ranked(messages)
    return pinch_session(
        messages,
        ledger,
        cache=CacheState(verdict, str(verdict), requests=5),
        budget_tokens=budget,
        keep_last_turns=KEEP,
        max_summarize_chars=MAX_CHARS,
        relevance_order=order,
        restorable=pointed,
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


def test_a_provider_that_caches_nothing_restores_only_what_the_newest_steps_point_at() -> None:
    ledger, again = compressed_view()
    assert ranked(again)[1] == [0]  # the file view: the newest step names handler_7, which only it holds
    done = pinch(again, ledger, CacheVerdict.NONE, 3200)
    assert done.messages[3]["content"] == FILE_VIEW and done.stats.restored == 1
    unpointed = pinch(history("ls docs"), ledger, CacheVerdict.NONE, 3200)
    assert unpointed.messages[3]["content"] != FILE_VIEW and unpointed.stats.restored == 0


def test_the_budget_decides_a_view_too_large_to_fit_stays_compressed() -> None:
    ledger, again = compressed_view()
    done = pinch(again, ledger, CacheVerdict.COLD, 400)
    assert done.messages[3]["content"] != FILE_VIEW and done.stats.restored == 0
