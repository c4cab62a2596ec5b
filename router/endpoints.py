"""The small endpoints outside the chain: health, model list."""

from __future__ import annotations

import orjson
from aiohttp import web

from router.config import Config

CONFIG_KEY = web.AppKey("config", Config)


def _json(payload: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    return _json({"status": "ok"})


async def list_models(request: web.Request) -> web.Response:
    """The catalogue and the routing aliases, in the OpenAI list format."""
    config = request.app[CONFIG_KEY]
    data = [
        {
            "id": m.name,
            "object": "model",
            "created": 0,
            "owned_by": m.provider,
            "context_window": m.context_window,
            "max_output_tokens": m.max_output_tokens,
            "supports": m.supports.model_dump(),
            "tiers": m.tiers,
        }
        for m in config.models
    ]
    data += [{"id": alias, "object": "model", "created": 0, "owned_by": "pinch-router", "alias": True} for alias in config.routing.aliases]
    return _json({"object": "list", "data": data})
