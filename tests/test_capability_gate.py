"""The capability gate through the running proxy."""

from __future__ import annotations

from tests.conftest import chat_body, make_config, model_entry
from tests.factories import image_part

URL = "/v1/chat/completions"


def catalogue(url: str):
    return make_config(
        url,
        models=[
            model_entry("text-only", supports={"tools": False, "vision": False, "json_mode": False}, quality=0.9),
            model_entry("tooler", supports={"tools": True, "vision": False, "json_mode": True}, quality=0.5),
            model_entry("seer", supports={"tools": True, "vision": True, "json_mode": True}, quality=0.3),
        ],
    )


async def test_needs_pick_a_capable_model(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(catalogue(url))
    plain = await client.post(URL, json=chat_body())
    assert plain.headers["x-router-model"] == "text-only"
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    with_tools = await client.post(URL, json=chat_body(tools=tools))
    assert with_tools.headers["x-router-model"] == "tooler"
    image = {"model": "auto", "messages": [{"role": "user", "content": [{"type": "text", "text": "what is this"}, image_part()]}]}
    with_image = await client.post(URL, json=image)
    assert with_image.headers["x-router-model"] == "seer"
    assert [r.body["model"] for r in mock.received] == ["up-text-only", "up-tooler", "up-seer"]


async def test_no_capable_model_is_a_400_naming_needs_and_rejections(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(catalogue(url))
    body = chat_body(max_tokens=10_000)
    resp = await client.post(URL, json=body)
    assert resp.status == 400
    error = (await resp.json())["error"]
    assert error["code"] == "no_capable_model"
    assert "10000 output tokens" in error["message"]
    for name in ("text-only", "tooler", "seer"):
        assert f"{name}: max output 4000 is smaller than the requested 10000" in error["message"]
    assert mock.received == []


async def test_a_pinned_model_is_used_and_still_gated(proxy, mock_upstream):
    mock, url = mock_upstream
    client = await proxy(catalogue(url))
    pinned = await client.post(URL, json=chat_body(model="seer"))
    assert pinned.headers["x-router-model"] == "seer"
    image = {"model": "tooler", "messages": [{"role": "user", "content": [image_part()]}]}
    refused = await client.post(URL, json=image)
    assert refused.status == 400
    error = (await refused.json())["error"]
    assert error["code"] == "no_capable_model" and "tooler: does not support images" in error["message"]


async def test_an_unknown_model_name_is_404_listing_what_exists(proxy, mock_upstream):
    _, url = mock_upstream
    client = await proxy(catalogue(url))
    resp = await client.post(URL, json=chat_body(model="gpt-17"))
    assert resp.status == 404
    error = (await resp.json())["error"]
    assert error["code"] == "model_not_found" and "text-only" in error["message"] and "auto" in error["message"]


async def test_configured_aliases_route(proxy, mock_upstream):
    _, url = mock_upstream
    config = make_config(url, routing={"aliases": ["auto", "gpt-4o"]})
    client = await proxy(config)
    resp = await client.post(URL, json=chat_body(model="gpt-4o"))
    assert resp.status == 200 and resp.headers["x-router-model"] == "main"
