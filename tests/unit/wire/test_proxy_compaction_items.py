"""Compaction items the proxy made from a chat model's summary, for a Responses client (Codex on OpenAI's provider).

The proxy answers Codex's ``compaction_trigger`` through a chat model with a ``compaction`` item whose
``encrypted_content`` is its marker and the summary. A Responses provider cannot read it (OpenAI refuses
encrypted content it did not make), so a passed-through request carries the summary as a user message
where the item stood; a provider's own compaction item goes out as sent.
"""

from __future__ import annotations

from typing import Any

from router.core.request_view import BodyChanges
from router.wire.openai_responses.compaction import SUMMARY_LEAD_IN, compaction_item, readable
from router.wire.openai_responses.validation import validate_responses_body
from router.wire.openai_responses.view import body_with_changes, responses_view
from tests.support.wire_factories import input_message, responses_body

OURS = compaction_item("cmp_0123abcd_0", "The user asked for the files; ls listed main.py.")
THEIRS = {"type": "compaction", "id": "cmp_68c1f0a2b3", "encrypted_content": "gAAAAB-opaque"}
SUMMARY = input_message("user", SUMMARY_LEAD_IN + "The user asked for the files; ls listed main.py.")


def sent_for(body: dict[str, Any], *, translated: bool = False) -> dict[str, Any]:
    view = responses_view(body, validate_responses_body(body), 2000)
    return body_with_changes(body, view, BodyChanges("gpt-up", translated=translated))


def test_the_proxys_compaction_item_reads_as_its_summary_and_a_providers_stays_as_it_is() -> None:
    assert readable(OURS) == SUMMARY
    assert readable(THEIRS) is THEIRS
    assert readable({**OURS, "encrypted_content": OURS["encrypted_content"][:-3]}) == {**OURS, "encrypted_content": OURS["encrypted_content"][:-3]}  # damaged: not ours


def test_a_passed_through_request_carries_the_proxys_summary_where_its_item_stood() -> None:
    body = responses_body(input_message("developer", "You are Codex."), OURS, input_message("user", "go on"), store=False)
    sent = sent_for(body)
    assert sent["input"] == [body["input"][0], SUMMARY, body["input"][2]]
    assert body["input"][1] is OURS  # the client's body is never changed


def test_a_providers_own_compaction_item_goes_out_as_sent() -> None:
    body = responses_body(THEIRS, input_message("user", "go on"), store=False)
    assert not validate_responses_body(body).proxy_items
    assert sent_for(body)["input"] is body["input"]


def test_a_translated_request_is_left_to_the_translation() -> None:
    body = responses_body(OURS, input_message("user", "go on"))
    assert sent_for(body, translated=True)["input"] == body["input"]
