"""The mock upstream for CPU benchmarks: ``pinch-router mock-upstream``, answering a body it has seen before from memory.

A CPU benchmark measures the proxy on one core while wrk and the mock upstream share the
other. The mock builds its answer from the request (it reads the conversation for its tool
call and counts its tokens), and that costs it by wire: on the 62 KB body 0.21 ms a request
as chat, 0.33 as Messages, 0.41 as Gemini (measured 2026-12-02). At concurrency 16 the load
core then runs out before the proxy's does for some wires and not others, and a proxy that is
not kept busy wakes once per request instead of once per batch: its CPU per request rises for
reasons of the load side (the floor's own cells showed it, 1.41× on Gemini's). Here an answer
to a non-streamed request whose path and bytes repeat one answered before is sent again as
the same bytes (the benchmarks resend one body), so the load side costs about as little,
whatever the wire; the proxy's work is the same, as it still reads and checks every answer.
Streamed requests and every other path are the mock's own, unchanged.

    python bench/memo_upstream.py --port PORT
"""

from __future__ import annotations

import argparse
from collections import OrderedDict
from typing import Any

from aiohttp import web

from router.tools.mock_upstream import MockUpstream

MEMO_ANSWERS = 64  # distinct (path, body) pairs kept: a benchmark sends a handful


def make_app() -> web.Application:
    answers: OrderedDict[tuple[str, bytes], tuple[int, dict[str, str], bytes]] = OrderedDict()

    @web.middleware
    async def memo(request: web.Request, handler: Any) -> web.StreamResponse:
        raw = await request.read()  # cached by aiohttp: the handler reads it again
        key = (request.path_qs, raw)
        known = answers.get(key)
        if known is not None:
            status, headers, body = known
            return web.Response(status=status, headers=headers, body=body)
        response = await handler(request)
        if isinstance(response, web.Response) and response.content_type == "application/json" and isinstance(response.body, bytes):
            headers = {name: value for name, value in response.headers.items() if name.lower() not in ("content-length", "date", "server")}
            answers[key] = (response.status, headers, response.body)
            if len(answers) > MEMO_ANSWERS:
                answers.popitem(last=False)
        return response

    app = MockUpstream(record=False).app()
    app.middlewares.insert(0, memo)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    web.run_app(make_app(), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
