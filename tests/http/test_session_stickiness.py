"""WHAT-USERS-HIT #20: one session stays on one model unless a rule says otherwise.

The classifier here changes its mind on every call (tier 1, then 3, then 1 …), as small
local classifiers do across the turns of a tool loop. With the session cache on (the
shipped config), a session is classified once and every later turn goes to the model
that answered its first — while a new session is classified on its own. The rules that
may move a session are tested where they live: a turn's own needs (images, window:
``test_classification_cache.py::test_cached_turns_are_gated_on_their_own_needs``),
failed outcomes (``test_decision_log.py::test_failed_outcomes_escalate_the_session_one_tier``)
and the cache's staleness (``…::test_after_the_staleness_window_the_next_turn_reclassifies_and_overwrites``).
"""

from __future__ import annotations

from typing import Any

from tests.support.classifier_fakes import OLLAMA_CHAT_URL, FakeClock, agent_turn, classifier_config, classifier_payloads, mocked_classifier, ollama_reply, verdict
from tests.support.config import model_entry
TIERED = [model_entry("easy-model", tiers=[1], quality=0.4), model_entry("hard-model", tiers=[3], quality=0.9)]


async def models_answering(client: Any, sessions: list[tuple[str, int]]) -> list[str]:
    answered = []
    for task, turn in sessions:
        resp = await client.post("/v1/chat/completions", json={"model": "auto", "messages": agent_turn(task, turn)})
        assert resp.status == 200, await resp.text()
        answered.append(resp.headers["x-router-model"])
    return answered


async def test_a_session_keeps_its_model_while_the_classifier_flips(proxy, mock_upstream):
    with mocked_classifier() as mock:
        for tier in (1, 3, 1, 3, 1, 3, 1):
            mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", tier)))
        client = await proxy(classifier_config(mock_upstream[1], models=TIERED), clock=FakeClock())
        answered = await models_answering(client, [("fix the failing webhook test", turn) for turn in range(1, 7)])
        assert len(classifier_payloads(mock)) == 1  # classified once: the flips never got asked
    assert answered == ["easy-model"] * 6


async def test_without_the_session_cache_the_same_classifier_flips_the_model_every_turn(proxy, mock_upstream):
    """The contrast that shows what the cache buys (session_cache.enabled: false)."""
    with mocked_classifier() as mock:
        for tier in (1, 3, 1, 3):
            mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", tier)))
        client = await proxy(classifier_config(mock_upstream[1], cache=False, models=TIERED), clock=FakeClock())
        answered = await models_answering(client, [("fix the failing webhook test", turn) for turn in range(1, 5)])
    assert answered == ["easy-model", "hard-model", "easy-model", "hard-model"]


async def test_sessions_interleaved_each_keep_their_own_model(proxy, mock_upstream):
    with mocked_classifier() as mock:
        for tier in (1, 3, 1, 3, 1, 3):
            mock.post(OLLAMA_CHAT_URL, payload=ollama_reply(verdict("debugging", tier)))
        client = await proxy(classifier_config(mock_upstream[1], models=TIERED), clock=FakeClock())
        turns = [("fix the failing webhook test", 1), ("design the new billing schema", 1)]
        turns += [(task, turn) for turn in (2, 3, 4) for task in ("fix the failing webhook test", "design the new billing schema")]
        answered = await models_answering(client, turns)
        assert len(classifier_payloads(mock)) == 2
    assert answered == ["easy-model", "hard-model"] * 4
