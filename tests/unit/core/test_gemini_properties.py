"""Property-based, on generated Gemini conversations: the translation to chat and back keeps every text, call
(name, arguments, id) and response; and pinch keeps every invariant on the Gemini wire (ARCHITECTURE §5).

Conversations are shaped like Gemini CLI's: user text (its session context first), model turns of thought
text, text and one to three function calls (with ids or without, with thought signatures or without),
each answered by one user content of function responses (``{"output": …}`` or any object), sometimes with
an image; then maybe a closing answer and a new user turn.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.pinch import prune_results
from router.core.request_view import BodyChanges
from router.translate.chat_to_gemini import chat_to_gemini_body
from router.translate.gemini_to_chat import gemini_to_chat_body
from router.wire.gemini.adapter import GEMINI_ADAPTER
from router.wire.gemini.parts import SKIP_SIGNATURE, function_call, function_response, parts_of
from router.wire.gemini.layout import response_text
from router.wire.gemini.view import GeminiConversation

PNG = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40)
outputs = st.builds(lambda n, c: (c * n)[:n] or "ok", st.sampled_from([1, 10, 300, 3000, 9000]), st.sampled_from(["ok\n", "FAILED x\n", "ü✓ "]))
responses = st.one_of(outputs.map(lambda t: {"output": t}), outputs.map(lambda t: {"result": t}), st.fixed_dictionaries({"error": outputs, "code": st.integers(0, 9)}))
args = st.dictionaries(st.sampled_from(["dir_path", "file_path", "pattern", "n"]), st.one_of(texts, st.integers(-5, 5), st.booleans()), max_size=3)


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "<session_context>\nmy workspace\n</session_context>"}, {"text": draw(texts)}]}]
    for turn in range(draw(st.integers(1, 6))):
        parts: list[dict[str, Any]] = []
        if draw(st.booleans()):
            parts.append({"text": draw(texts), "thought": True})
        if draw(st.booleans()):
            parts.append({"text": draw(texts)})
        names = [draw(st.sampled_from(["list_directory", "read_file", "glob"])) for _ in range(draw(st.integers(1, 3)))]
        with_ids = draw(st.booleans())
        for i, name in enumerate(names):
            part: dict[str, Any] = {"functionCall": {**({"id": f"{name}_{turn}_{i}"} if with_ids else {}), "name": name, "args": draw(args)}}
            if i == 0 and draw(st.booleans()):
                part["thoughtSignature"] = f"c2lnbmF0dXJl{turn}"
            parts.append(part)
        contents.append({"role": "model", "parts": parts})
        answers = [{"functionResponse": {**({"id": f"{name}_{turn}_{i}"} if with_ids else {}), "name": name, "response": draw(responses)}} for i, name in enumerate(names)]
        contents.append({"role": "user", "parts": answers + ([PNG] if draw(st.booleans()) else [])})
    if draw(st.booleans()):
        contents += [{"role": "model", "parts": [{"text": draw(texts)}]}, {"role": "user", "parts": [{"text": draw(texts)}]}]
    return contents


def calls_of(contents: list[dict[str, Any]]) -> list[tuple[str, Any, Any]]:
    return [(c["name"], c.get("args") or {}, c.get("id")) for content in contents for p in parts_of(content) if (c := function_call(p)) is not None]


def answers_of(contents: list[dict[str, Any]]) -> list[tuple[Any, str]]:
    return [(r.get("id"), response_text(r.get("response"))[0]) for content in contents for p in parts_of(content) if (r := function_response(p)) is not None]


def texts_of(contents: list[dict[str, Any]]) -> list[str]:
    return [p["text"] for content in contents for p in parts_of(content) if isinstance(p.get("text"), str) and not p.get("thought")]


@settings(max_examples=200, deadline=None)
@given(conversations(), st.booleans())
def test_to_chat_and_back_keeps_every_text_call_and_response(contents, system):
    body = {"contents": contents, **({"systemInstruction": {"parts": [{"text": "You are Gemini CLI."}]}} if system else {})}
    back = chat_to_gemini_body(gemini_to_chat_body(body, "m"))
    returned = back["contents"]
    assert [t for t in texts_of(returned)] == texts_of(contents)
    assert (back.get("systemInstruction") is not None) == system
    sent_calls, got_calls = calls_of(contents), calls_of(returned)
    assert [(n, a) for n, a, _ in got_calls] == [(n, a) for n, a, _ in sent_calls]
    assert all(got == sent for (_, _, sent), (_, _, got) in zip(sent_calls, got_calls, strict=True) if sent is not None)
    # every response comes back, for the call it answered (ids kept where Gemini gave them, made where it did not)
    got_answers = answers_of(returned)
    assert [text for _, text in got_answers] == [text for _, text in answers_of(contents)]
    assert [i for i, _ in got_answers] == [i for _, _, i in got_calls]
    # each model turn's first call goes to Gemini with a signature (Google's placeholder: the history is not its own)
    for content in returned:
        parts = parts_of(content)
        first = next((p for p in parts if function_call(p) is not None), None)
        assert first is None or first.get("thoughtSignature") == SKIP_SIGNATURE
    # the images of the function responses' contents come back as images
    assert sum("inlineData" in p for c in returned for p in parts_of(c)) == sum("inlineData" in p for c in contents for p in parts_of(c))


@settings(max_examples=200, deadline=None)
@given(conversations(), st.integers(0, 4000), st.integers(1, 4))
def test_pinch_on_the_gemini_wire_changes_only_old_function_responses(contents, budget, keep):
    original = copy.deepcopy(contents)
    conversation = GeminiConversation(None, contents)
    rewrites, stats = prune_results(conversation, budget, keep, 400)
    sent = conversation.contents_with(rewrites)
    assert contents == original  # the client's body is never mutated
    assert len(sent) == len(contents) and [c["role"] for c in sent] == [c["role"] for c in contents]  # nothing added, removed or moved
    assert calls_of(sent) == calls_of(contents)  # the pairs: every call kept, with its id
    assert [i for i, _ in answers_of(sent)] == [i for i, _ in answers_of(contents)]
    protected = conversation.last_turns_start(keep)
    for c, (before, after) in enumerate(zip(contents, sent, strict=True)):
        for p, (a, b) in enumerate(zip(before["parts"], after["parts"], strict=True)):
            if a == b:
                continue
            # only a function response's `response` changes, and only before the protected turns
            assert function_response(a) is not None and {k: v for k, v in a["functionResponse"].items() if k != "response"} == {k: v for k, v in b["functionResponse"].items() if k != "response"}
            unit = next(u for u, (cc, pp) in zip(conversation.result_units(), conversation._where) if (cc, pp) == (c, p))
            assert protected and unit < protected
    # stats are exact on the units the estimator counts, and the body the provider gets is the rewritten one
    body = {"contents": contents}
    payload = orjson.loads(GEMINI_ADAPTER.upstream_body(body, GEMINI_ADAPTER.parse(body, 2000, _target()), BodyChanges("m", rewrites)))  # type: ignore[arg-type]
    assert [c["parts"] for c in payload["contents"]] == [[{k: v for k, v in p.items()} for p in c["parts"]] for c in _signed(sent)]
    assert stats.final_tokens <= stats.original_tokens


def _target():
    from router.core.request_view import RequestTarget

    return RequestTarget({"model": "auto", "action": "generateContent"})


def _signed(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the adapter adds for the provider: the placeholder on a current-turn step's unsigned first call."""
    from router.wire.gemini.body import signed

    return signed(contents, (), GeminiConversation(None, contents).unsigned_calls)[0]
