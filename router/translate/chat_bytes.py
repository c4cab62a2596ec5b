"""A translated chat body's bytes, each message a conversation resends written once. Pure.

A translation to chat makes the messages a conversation repeats from turn to turn once and then
takes them again, the very objects (:mod:`router.translate.element_memo`), and nothing ever changes
one. So their JSON is the same bytes every turn: :func:`chat_body_bytes` keeps each message's
writing for the arrays it wrote last (:data:`MESSAGE_BYTES`) and writes only the messages that are
new objects — the turn's new ones, one pinch rewrote anew, the leading system message each
translation makes anew. Byte for byte ``orjson.dumps`` of the body: a long conversation sent to a
chat provider is not serialised again each turn, as a body passed through is not
(:meth:`router.core.resent_prefix.KnownBody.written`). Forgotten with the memos when the proxy goes idle.
"""

from __future__ import annotations

from typing import Any

import orjson

from router.translate.element_memo import ElementMemo

MESSAGE_BYTES: ElementMemo[bytes] = ElementMemo()
# stands for the messages in the body's writing: a NUL no JSON text holds raw (orjson writes one in a
# string as \u0000), so the body's bytes hold it once, where the array goes
_PLACE = orjson.Fragment(b'"\x00"')


def chat_body_bytes(chat: dict[str, Any]) -> bytes:
    """``orjson.dumps(chat)``, byte for byte; the messages after the first that the body written last
    in this conversation had at the same place (the same objects) are their bytes of then."""
    messages = chat.get("messages")
    if type(messages) is not list or len(messages) < 2:
        return orjson.dumps(chat)
    around = orjson.dumps({**chat, "messages": _PLACE}).split(b'"\x00"')
    if len(around) != 2:  # a fragment of the body's own holding one (none the translations make)
        return orjson.dumps(chat)
    head, tail = around
    # the first (the system message, made anew each turn) is written; the rest are found by their first
    pieces = MESSAGE_BYTES.map(messages[1:], orjson.dumps)
    pieces[-1] += b"]" + tail
    pieces[0] = head + b"[" + orjson.dumps(messages[0]) + b"," + pieces[0]
    return b",".join(pieces)  # the body's one copy
