"""The shape of a translated chat conversation that strict chat templates accept. Pure.

The chat templates Ollama, llama.cpp and vLLM render a conversation with (Jinja templates shipped
with the model) often accept one system message, first, and raise on any other ("System message
must be at the beginning."); some demand that user and assistant turns alternate. A translation
from another client API easily breaks both: Claude Code sends a mid-conversation ``system``
message (its ``# Environment`` block) after the first user message, Codex two ``developer``
messages and two user messages in a row.

:func:`strict_chat_messages` reshapes a translated conversation without losing anything: the
content of every system message, in order, becomes one leading system message (joined by a blank
line), and consecutive user messages become one (text joined by a blank line; a message with image
parts keeps its parts, in order). Tool calls, tool results and assistant turns are left as they
are. A provider that accepts more (``providers.<name>.system_messages: anywhere``) gets its system
messages where the client put them; consecutive user messages are joined either way, which no chat
server refuses.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

from router.core.content import Message
from router.translate.element_memo import PassMemo

SEPARATOR = "\n\n"


def strict_chat_messages(messages: list[Message], *, system_anywhere: bool = False, memo: PassMemo[Message] | None = None) -> list[Message]:
    """``messages`` with one leading system message (unless ``system_anywhere``) and no two user
    messages in a row (see the module doc). With a ``memo``, what was made of the messages a
    conversation repeats (the very objects) after its leading system message is taken again."""
    if not system_anywhere:
        messages = _one_leading_system(messages)
    # a leading system message joins nothing: the rest is merged as a list of its own (the system
    # message is made anew each request, the conversation's messages are the same objects while resent)
    lead = 1 if messages and messages[0].get("role") == "system" else 0
    return messages[:lead] + _users_merged(messages[lead:], memo)


def _users_merged(messages: list[Message], memo: PassMemo[Message] | None) -> list[Message]:
    """``messages`` with each run of plain user messages joined into one; with a ``memo``, resumed
    at the last message it repeats before which the output is final (the output's last no plain user)."""
    start, out, marks = memo.resume(messages, None) if memo is not None else (0, [], [])
    for at in range(start, len(messages)):
        message = messages[at]
        if out and _plain_user(message) and _plain_user(out[-1]):
            out[-1] = {"role": "user", "content": _joined(out[-1].get("content"), message.get("content"))}
        else:
            marks.append((at, len(out)))  # what is before it is never joined again
            out.append(message)
    if memo is not None:
        memo.keep(messages, None, out, marks)
    return out


def _plain_user(message: Message) -> bool:
    """A user message with nothing but its content (a ``name`` would be lost in a join)."""
    return message.get("role") == "user" and set(message) <= {"role", "content"}


def _one_leading_system(messages: list[Message]) -> list[Message]:
    # the roles read and counted in C: a long conversation is scanned each request, and has none but the first
    roles = list(map(dict.get, messages, repeat("role")))
    count = roles.count("system")
    if not count or (count == 1 and roles[0] == "system"):
        return messages
    systems = [m for m in messages if m.get("role") == "system"]
    texts = [text for m in systems if (text := _text(m.get("content")))]
    rest = [m for m in messages if m.get("role") != "system"]
    return [{"role": "system", "content": SEPARATOR.join(texts)}, *rest] if texts else rest


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return SEPARATOR.join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _joined(first: Any, second: Any) -> Any:
    """Two user contents as one: a string when both are text, else the parts of both in order."""
    if isinstance(first, str) and isinstance(second, str):
        return SEPARATOR.join(t for t in (first, second) if t)
    return [*_parts(first), *_parts(second)]


def _parts(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if isinstance(content, str) and content else []
