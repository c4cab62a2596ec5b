"""The exchange's guard over stream translators: what a translation cannot read is a malformed answer."""

from __future__ import annotations

import logging

import pytest

from router.clients.exchange import ReadGuard
from router.translate.protocol import MalformedAnswer, StreamBroken


class Breaks:
    """A stream translator that fails as a translator with a gap in its checks would."""

    usage = None

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def feed(self, chunk: bytes) -> bytes:
        raise self.exc

    def finish(self) -> bytes:
        raise self.exc


@pytest.mark.parametrize("exc", [AttributeError("'list' object has no attribute 'items'"), KeyError("delta"), TypeError("x")])
def test_whatever_a_translation_raises_on_a_providers_events_is_a_malformed_answer(exc, caplog):
    guard = ReadGuard(Breaks(exc), "req_1")
    with caplog.at_level(logging.WARNING, "pinch_router.exchange"):
        with pytest.raises(MalformedAnswer, match=type(exc).__name__):
            guard.feed(b"data: {}\n\n")
        with pytest.raises(MalformedAnswer):
            guard.finish()
    assert [r.message for r in caplog.records] == ["translation_failed", "translation_failed"]  # a bug is still seen


def test_the_providers_own_stream_error_passes_as_it_is():
    with pytest.raises(StreamBroken, match="overloaded") as raised:
        ReadGuard(Breaks(StreamBroken("overloaded")), "req_1").feed(b"")
    assert type(raised.value) is StreamBroken
