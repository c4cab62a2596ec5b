import asyncio, tempfile, time, statistics, subprocess, sys, signal
from pathlib import Path
import orjson
from bench.harness import drive, free_port, mock_upstream, spawn, transcript_body, write_config, wait_for_port
from bench.bench_proxy import chain_sections
up, pp = free_port(), free_port()
upstream = f"http://127.0.0.1:{up}/v1"
sections = chain_sections(); sections["classifier"] = {"provider": "mock", "model": "m"}
tmp = tempfile.mkdtemp()
cfg = write_config(Path(tmp)/"c.yaml", pp, upstream, **sections)
with spawn(mock_upstream(up), up):
    p = subprocess.Popen([sys.executable, "-m", "cProfile", "-o", "/tmp/proxy.prof", "-m", "router", "serve", "--config", str(cfg)], stderr=subprocess.DEVNULL)
    wait_for_port(pp)
    body = orjson.dumps({**transcript_body(), "stream": False})
    r = asyncio.run(drive(f"http://127.0.0.1:{pp}/v1/chat/completions", body, 1000, 1, False))
    print("client p50", statistics.median(r.latencies_ms))
    p.send_signal(signal.SIGINT); p.wait(20)
import pstats
pstats.Stats("/tmp/proxy.prof").sort_stats("tottime").print_stats(30)
