"""Session keys (ARCHITECTURE §7). Pure.

A key is either derived from an explicit client header or fingerprinted from
the opening of the conversation: the leading system/developer messages and the
first user message. Those never change during an agent session, while later
messages do, so the fingerprint is stable turn to turn and differs between
sessions with different tasks. Only message *text* is hashed: markers such as
``cache_control`` that clients move between turns do not change the key. With
client keys configured, every key is scoped to the client's own
(:func:`client_session_key`); what a fingerprint can and cannot tell apart is
in docs/sessions.md.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from router.core.content import Message, content_text

KEY_HEX_CHARS = 24


def _digest(kind: bytes, parts: Sequence[str]) -> str:
    h = hashlib.sha256(kind)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:KEY_HEX_CHARS]


def opening_parts(messages: list[Message]) -> tuple[str, ...]:
    """What a fingerprint hashes: the text of each leading system message and of the first user message, after its role.

    The first user message is the user's own first words: an agent's worked examples
    and context messages that open every one of its sessions alike are passed over
    (:func:`_first_own_words`), else every session of that agent would share one key.
    """
    parts: list[str] = []
    index = 0
    while index < len(messages) and messages[index].get("role") in ("system", "developer"):
        parts += ["system", content_text(messages[index].get("content"))]
        index += 1
    own_words = _first_own_words(messages, index, parts[-1] if parts else "")
    if own_words is not None:
        parts += ["user", own_words]
        return tuple(parts)
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    if first_user is not None:
        parts += ["user", content_text(first_user.get("content"))]
    return tuple(parts)


# aider (0.86) opens every request with worked examples of its edit format — the same user and
# assistant messages in every session — closed by this user message and the model's "Ok."; the
# conversation follows, with its context as user messages opening with these words (the repo map,
# read-only files, the files in the chat, or none), each answered "Ok…", wherever aider puts them.
AIDER_EXAMPLES_END = "I switched to a new code base. Please don't consider the above files or try to edit them any longer."
AIDER_CONTEXT_OPENINGS = (
    "Here are summaries of some files present in my git repository.",
    "Here are some READ ONLY files, provided for your reference.",
    "I have *added these files to the chat* so you can go ahead and edit them.",
    "I am not sharing any files that you can edit yet.",
    "Don't try and edit any existing code without asking me to add the files to the chat!",
)
# where the examples end at the latest (aider's longest edit format has 4 example messages)
_EXAMPLES_WITHIN = 16


def _first_own_words(messages: list[Message], start: int, system_text: str) -> str | None:
    """The user's first message after an aider examples block, without aider's context messages and the
    reminder aider appends to the newest one (the end of its system prompt, repeated after a blank line);
    None when the request opens with no such block.

    So the key is the same on the first turn (the words are the newest message, reminder appended)
    and on every later one (they are the first of the history, as typed) — until aider summarises
    its history, which replaces them.
    """
    end = next(
        (i for i in range(start, min(len(messages), start + _EXAMPLES_WITHIN))
         if messages[i].get("content") == AIDER_EXAMPLES_END and messages[i].get("role") == "user"),  # aider sends strings
        None,
    )  # fmt: skip
    if end is None:
        return None
    for message in messages[end + 1 :]:
        if message.get("role") != "user":
            continue
        text = content_text(message.get("content"))
        if text.startswith(AIDER_CONTEXT_OPENINGS):
            continue
        # the earliest blank line after which the text ends as the system prompt does
        at = text.find("\n\n", len(text) - _common_suffix_length(text, system_text) - 2)
        return (text[:at] if at != -1 and at + 2 < len(text) else text).strip()
    return None


def _common_suffix_length(a: str, b: str) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:  # binary search: a matching suffix's shorter suffixes match too
        middle = (low + high + 1) // 2
        if a.endswith(b[len(b) - middle :]):
            low = middle
        else:
            high = middle - 1
    return low


def session_fingerprint(messages: list[Message]) -> str:
    return _digest(b"fingerprint\0", opening_parts(messages))


# Characters from each end of every part that, with its length, file an opening in the cache.
_PROBE_CHARS = 64


class FingerprintCache:
    """The fingerprints of recently seen openings, so a session's later turns skip the hash.

    Every turn of an agent session resends the same opening, and hashing it was the
    costliest part of the session-fingerprint stage (SHA-256 over ~24 KB on every
    request of the proxy benchmark). An entry is filed under its parts' lengths and
    ends, and used only when its texts equal the request's: a comparison, several
    times cheaper than the hash, so the key is always exactly the one
    :func:`session_fingerprint` gives. Each entry keeps the texts it is compared
    against, so the cache holds at most ``max_entries`` openings and ``max_chars``
    characters of them, least recently used first out; an opening larger than a
    sixteenth of that is hashed every time instead of filed.
    """

    def __init__(self, max_entries: int = 256, max_chars: int = 8_000_000) -> None:
        if max_entries <= 0 or max_chars <= 0:
            raise ValueError("max_entries and max_chars must be positive")
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.chars = 0
        self._entries: OrderedDict[tuple[tuple[int, str, str], ...], tuple[tuple[str, ...], str, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def fingerprint(self, messages: list[Message]) -> str:
        return self.fingerprint_opening(opening_parts(messages))

    def fingerprint_opening(self, parts: tuple[str, ...]) -> str:
        """The fingerprint of an opening as :func:`opening_parts` (or a wire adapter's view) gives it."""
        probe = tuple((len(part), part[:_PROBE_CHARS], part[-_PROBE_CHARS:]) for part in parts)
        entry = self._entries.get(probe)
        if entry is not None and entry[0] == parts:
            self._entries.move_to_end(probe)
            return entry[1]
        digest = _digest(b"fingerprint\0", parts)
        size = sum(len(part) for part in parts)
        if size <= self.max_chars // 16:
            if entry is not None:  # a different opening filed alike: replaced, so it was only ever a miss
                self.chars -= entry[2]
            self._entries[probe] = (parts, digest, size)
            self._entries.move_to_end(probe)
            self.chars += size
            while len(self._entries) > self.max_entries or self.chars > self.max_chars:
                self.chars -= self._entries.popitem(last=False)[1][2]
        return digest


def header_session_key(value: str, client_id: str | None = None) -> str:
    """The key of a session the client named (a session header, Anthropic's ``metadata.user_id``)."""
    return client_session_key(_digest(b"header\0", [value]), client_id)


def client_session_key(key: str, client_id: str | None) -> str:
    """``key`` within one client's sessions: with ``server.api_keys`` set, the id of the key the
    client authenticated with (:func:`client_key_id`) is part of every session key, so two users
    who send the same opening (or the same session id) never share a classification, a pinch
    ledger or an escalation. None (no keys configured): the key as it is, everyone's alike."""
    return key if client_id is None else _digest(b"client\0", [client_id, key])


def client_key_id(api_key: str) -> str:
    """A client key's id: a digest that names the key without being it (the key is never stored)."""
    return hashlib.sha256(b"client-key\0" + api_key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def session_header(headers: Mapping[str, str], names: list[str]) -> str | None:
    """The first non-empty configured session header, if the client sent one."""
    for name in names:
        value = headers.get(name)
        if value and value.strip():
            return value.strip()
    return None
