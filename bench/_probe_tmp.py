import asyncio, tempfile, time, statistics
from pathlib import Path
import orjson, aiohttp
from bench.harness import drive, free_port, mock_upstream, proxy, spawn, transcript_body, write_config
from bench.bench_proxy import chain_sections
up, pp = free_port(), free_port()
upstream = f"http://127.0.0.1:{up}/v1"
sections = chain_sections(); sections["classifier"] = {"provider": "mock", "model": "m"}; import os; sections["decision_log"] = {"enabled": os.environ.get("DL","1")=="1"}; sections["logging"] = {"level": os.environ.get("LL","info")}
with tempfile.TemporaryDirectory() as tmp:
    cfg = write_config(Path(tmp)/"c.yaml", pp, upstream, **sections)
    with spawn(mock_upstream(up), up), spawn(proxy(cfg), pp):
        body = orjson.dumps({**transcript_body(), "stream": False})
        r = asyncio.run(drive(f"http://127.0.0.1:{pp}/v1/chat/completions", body, 300, 1, False))
        print("client p50", statistics.median(r.latencies_ms))
        async def rows():
            async with aiohttp.ClientSession() as s:
                async with s.get(f"http://127.0.0.1:{pp}/v1/decisions?limit=200") as resp: return (await resp.json())["data"]
        data = asyncio.run(rows())
        for key in ("duration_ms","upstream_ms","first_byte_ms","overhead_ms"):
            print(key, statistics.median(d[key] for d in data))
        stages = {}
        for d in data:
            for s in d["stages"]: stages.setdefault(s["stage"], []).append(s["ms"])
        for k,v in stages.items(): print(" ", k, round(statistics.median(v),3))
