"""The floor: a minimal pass-through aiohttp proxy, the least any proxy must cost.

It reads the body, forwards it unchanged to one upstream over a shared
ClientSession and relays the answer (streams chunk by chunk). No parsing, no
routing, no headers. bench_proxy.py compares pinch-router against it. Any POST
path goes to the same path of the upstream (``--upstream`` is its ``/v1``), so
bench_wires.py has the floor of every wire: chat, Messages, Responses, Gemini.
"""

from __future__ import annotations

import argparse

import aiohttp
from aiohttp import web

SESSION = web.AppKey("session", aiohttp.ClientSession)


def make_app(upstream: str) -> web.Application:
    root = upstream.removesuffix("/").removesuffix("/v1")

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        session = request.app[SESSION]
        async with session.post(root + request.path_qs, data=body, headers={"Content-Type": "application/json"}) as up:
            if up.content_type == "text/event-stream":
                response = web.StreamResponse(status=up.status, headers={"Content-Type": "text/event-stream"})
                await response.prepare(request)
                async for chunk in up.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
            return web.Response(status=up.status, body=await up.read(), content_type=up.content_type)

    async def start(app: web.Application) -> None:
        app[SESSION] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=512))

    async def stop(app: web.Application) -> None:
        await app[SESSION].close()

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/{path:.*}", forward)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    web.run_app(make_app(args.upstream), host="127.0.0.1", port=args.port, print=None, access_log=None)
