"""What leaves the process of text the proxy did not write: quoted in errors, written in headers."""

from __future__ import annotations

import orjson

from router.core.redaction import header_value, quoted


def test_what_a_validation_message_quotes_of_any_json_value_is_short():
    assert quoted("user\n") == "'user\\n'"
    assert quoted("r" * 1_000_000).endswith("… (1,000,000 characters)'") and len(quoted("r" * 1_000_000)) < 80
    assert [quoted(v) for v in ({"a": 1}, [1] * 10**6, None, True, 3.5, orjson.Fragment(b"1e400"))] == ["an object", "an array", "None", "True", "3.5", "a number"]
    assert header_value("tool a\nb") == "tool a\\x0ab" and header_value("tool web_search") == "tool web_search"
    assert header_value("\u00e9\U0001f600\x7f") == "\\xe9\\U0001f600\\x7f"
    assert header_value("x" * 5000).endswith("... (5,000 characters)") and header_value("x" * 5000).isascii()
