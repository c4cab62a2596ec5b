"""`pinch-router eval-pinch`: replay a transcript through pinch, uniform vs relevance."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from router.cli import main
from router.eval_pinch import ProgressBar, eval_pinch
from router.transcripts import Transcript, load_transcript
from tests.relevance_fakes import (
    BUDGET,
    EMBED_BASE,
    EMBED_URL,
    FakeEmbedder,
    mocked_embeddings,
    relevance_config,
    session,
)


def write_config(tmp_path: Path, api: str = "openai", **pinch: Any) -> Path:
    raw: dict[str, Any] = {
        "middlewares": ["session-fingerprint", "pinch-relevance", "pinch-prune", "capability-gate", "upstream-forward"],
        "providers": {"mock": {"base_url": "http://127.0.0.1:9/v1"}},
        "models": [{"name": "main", "provider": "mock", "upstream_model": "m", "context_window": 32000, "max_output_tokens": 4000, "tiers": [1, 2, 3]}],
        "pinch": {
            "enabled": True,
            "budget_tokens": BUDGET,
            "keep_last_turns": 1,
            "max_summarize_chars": 400,
            "relevance": {"enabled": True, "model": "fake-embed", "base_url": EMBED_BASE, "api": api},
            **pinch,
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def write_transcript(tmp_path: Path, messages: list[dict[str, Any]], name: str = "session.json") -> Path:
    path = tmp_path / name
    path.write_bytes(orjson.dumps({"messages": messages, "tools": []}))
    return path


def test_each_assistant_message_is_a_turn_boundary() -> None:
    messages = session(turn=2)
    turns = Transcript("t", messages, None).turn_requests()
    assert [len(request) for request in turns] == [2, 4, 6, 8, 10]
    assert turns[-1] == session(turn=1)


@pytest.mark.parametrize("api", ["openai", "ollama"])
def test_replay_prints_tokens_calls_and_survivors_per_transcript(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], api: str
) -> None:
    config = write_config(tmp_path, api)
    transcript = write_transcript(tmp_path, session(turn=2))
    fake = FakeEmbedder(api)
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL[api], callback=fake.answer, repeat=True)
        assert main(["eval-pinch", "--config", str(config), str(transcript)]) == 0
    out, err = capsys.readouterr()
    # turns 1-3 are within budget (no call); turn 4 embeds its queries and two results, turn 5 only what is new
    assert [len(texts) for texts in fake.calls] == [4, 2]
    assert out.splitlines()[0] == "session"
    assert "turns: 5, over the" in out
    assert "embeddings: 2 calls, 6 texts embedded, 3 from cache; relevance ok 2, skipped 3" in out
    # uniform compresses every old result; relevance keeps the old migration result on both pruned turns
    assert "kept verbatim on over-budget turns: uniform 0, relevance 2 (of 5 candidates)" in out
    assert "[##############################] 5/5 turns" in err
    assert f"embeddings {api} {EMBED_BASE}" in err


def test_an_unavailable_endpoint_is_counted_with_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    transcript = write_transcript(tmp_path, session(turn=2))
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["openai"], status=500, payload={"error": {"message": "no such model"}}, repeat=True)
        assert main(["eval-pinch", "--config", str(config), str(transcript)]) == 0
    out, _ = capsys.readouterr()
    assert "relevance skipped 3, unavailable 2" in out
    assert "uniform 0, relevance 0 (of 5 candidates)" in out
    assert "unavailable x2: http://127.0.0.1:9/v1/embeddings answered 500: JSON body of 39 bytes" in out


def test_budget_override_and_several_transcripts(tmp_path: Path) -> None:
    config = relevance_config()
    first = write_transcript(tmp_path, session(turn=2), "first.json")
    second = write_transcript(tmp_path, session(turn=1), "second.json")
    out, err = io.StringIO(), io.StringIO()
    with mocked_embeddings() as mock:
        mock.post(EMBED_URL["openai"], callback=FakeEmbedder("openai").answer, repeat=True)
        assert eval_pinch(config, [str(first), str(second)], budget=10**6, out=out, err=err) == 0
    report = out.getvalue()
    assert report.count("over the 1,000,000-token budget: 0") == 2
    assert "embeddings: 0 calls" in report
    assert "9/9 turns" in err.getvalue()


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"{not json", "not valid JSON"), (b'{"messages": "hi"}', "expected"), (b"[1, 2]", "expected")],
)
def test_a_bad_transcript_is_reported_not_raised(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    err = io.StringIO()
    assert eval_pinch(relevance_config(), [str(path)], out=io.StringIO(), err=err) == 2
    assert message in err.getvalue() and "bad.json" in err.getvalue()


def test_a_missing_file_is_reported(tmp_path: Path) -> None:
    err = io.StringIO()
    assert eval_pinch(relevance_config(), [str(tmp_path / "nope.json")], out=io.StringIO(), err=err) == 2
    assert "cannot read" in err.getvalue()


def test_a_bare_list_of_messages_is_a_transcript(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_bytes(orjson.dumps(session()))
    transcript = load_transcript(path)
    assert (transcript.name, len(transcript.messages), transcript.tools) == ("list", 10, None)


def test_budget_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval-pinch", "--budget", "0", "x.json"])
    assert "must be at least 1" in capsys.readouterr().err


def test_progress_bar_fills_up_and_ends_the_line() -> None:
    stream = io.StringIO()
    bar = ProgressBar(4, stream, width=8)
    bar.advance("a")
    bar.advance("a")
    bar.close()
    assert "\r[####----] 2/4 turns  a" in stream.getvalue()
    assert stream.getvalue().endswith("\n")
