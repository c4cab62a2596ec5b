"""The streams open right now, so that stopping can end them cleanly.

A stream relay registers itself while it pumps; at shutdown, when the drain
timeout runs out or the user presses Ctrl-C a second time, :meth:`OpenStreams.cut`
ends each one the way a broken upstream would be ended: the client gets an SSE
error event and ``[DONE]``, and the decision row says why (``stream_error``).
"""

from __future__ import annotations

from typing import Protocol

from aiohttp import web


class Cuttable(Protocol):
    def cut(self, reason: str) -> None: ...


class OpenStreams:
    def __init__(self) -> None:
        self._streams: set[Cuttable] = set()

    def __len__(self) -> int:
        return len(self._streams)

    def add(self, stream: Cuttable) -> None:
        self._streams.add(stream)

    def discard(self, stream: Cuttable) -> None:
        self._streams.discard(stream)

    def cut(self, reason: str) -> int:
        """End every open stream with ``reason``; returns how many were cut."""
        streams = list(self._streams)
        for stream in streams:
            stream.cut(reason)
        return len(streams)


OPEN_STREAMS_KEY = web.AppKey("open_streams", OpenStreams)
