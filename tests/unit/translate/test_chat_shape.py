"""A translated chat conversation in the shape strict chat templates accept (router/translate/chat_shape.py)."""

from __future__ import annotations

import orjson

from router.translate.chat_shape import strict_chat_messages
from router.translate.messages_to_chat import MessagesToChatTranslator
from router.translate.protocol import AnswerIds
from router.core.results import Candidate

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}


def test_later_system_content_joins_the_leading_one_in_order_and_nothing_is_lost():
    messages = [
        {"role": "system", "content": "you are an agent"},
        {"role": "user", "content": [{"type": "text", "text": "<reminder>"}, {"type": "text", "text": "list files"}]},
        {"role": "system", "content": "# Environment\ncwd: /w"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "system", "content": [{"type": "text", "text": "late note"}]},
        {"role": "assistant", "content": "done"},
    ]
    shaped = strict_chat_messages(messages)
    assert shaped[0] == {"role": "system", "content": "you are an agent\n\n# Environment\ncwd: /w\n\nlate note"}
    assert shaped[1:] == [m for m in messages if m["role"] != "system"]
    assert strict_chat_messages(messages, system_anywhere=True) == messages  # the provider takes them where they are


def test_consecutive_user_messages_become_one_keeping_parts_and_order():
    messages = [
        {"role": "system", "content": "dev 1"},
        {"role": "system", "content": "dev 2"},
        {"role": "user", "content": "<environment_context>"},
        {"role": "user", "content": "list the files"},
        {"role": "user", "content": [IMAGE]},
        {"role": "user", "content": "named", "name": "other"},  # a name would be lost in a join: kept apart
    ]
    assert strict_chat_messages(messages) == [
        {"role": "system", "content": "dev 1\n\ndev 2"},
        {"role": "user", "content": [{"type": "text", "text": "<environment_context>\n\nlist the files"}, IMAGE]},
        {"role": "user", "content": "named", "name": "other"},
    ]
    assert strict_chat_messages([{"role": "user", "content": "hi"}]) == [{"role": "user", "content": "hi"}]


def test_the_messages_translation_sends_claude_codes_environment_block_in_the_leading_system_message():
    body = {
        "model": "m", "max_tokens": 100, "system": [{"type": "text", "text": "be Claude"}],
        "messages": [{"role": "user", "content": "list files"}, {"role": "system", "content": "# Environment"}],
    }
    candidate = Candidate("m", "p", "up")
    leading = orjson.loads(MessagesToChatTranslator(AnswerIds("0" * 24, 0)).request(orjson.dumps(body), candidate))
    assert leading["messages"] == [{"role": "system", "content": "be Claude\n\n# Environment"}, {"role": "user", "content": [{"type": "text", "text": "list files"}]}]
    anywhere = orjson.loads(MessagesToChatTranslator(AnswerIds("0" * 24, 0), system_anywhere=True).request(orjson.dumps(body), candidate))
    assert [m["role"] for m in anywhere["messages"]] == ["system", "user", "system"]
