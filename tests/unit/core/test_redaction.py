"""What leaves the process of text the proxy did not write: quoted in errors, written in headers."""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.core.redaction import header_value, header_values, quoted


def test_what_a_validation_message_quotes_of_any_json_value_is_short():
    assert quoted("user\n") == "'user\\n'"
    assert quoted("r" * 1_000_000).endswith("… (1,000,000 characters)'") and len(quoted("r" * 1_000_000)) < 80
    assert [quoted(v) for v in ({"a": 1}, [1] * 10**6, None, True, 3.5, orjson.Fragment(b"1e400"))] == ["an object", "an array", "None", "True", "3.5", "a number"]
    assert header_value("tool a\nb") == "tool a\\x0ab" and header_value("tool web_search") == "tool web_search"
    assert header_value("\u00e9\U0001f600\x7f") == "\\xe9\\U0001f600\\x7f"
    assert header_value("x" * 5000).endswith("... (5,000 characters)") and header_value("x" * 5000).isascii()


_VALUE = st.one_of(st.text(max_size=30), st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=700))


# the first text a process draws waits for hypothesis's table of characters (~2.6 s on a fresh clone
# in a loaded worker of the fast loop: a too_slow failure, not the proxy's)
@given(st.dictionaries(st.sampled_from(["x-router-model", "x-router-dropped", "x-router-session", "x-router-tier"]), _VALUE, max_size=4))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_a_head_checked_at_once_is_what_each_value_checked_alone_makes(headers):
    assert header_values(headers) == {name: header_value(value) for name, value in headers.items()}


def test_a_head_checked_at_once_still_escapes_and_cuts_each_value():
    assert header_values({"a": "tool a\nb", "b": "ok"}) == {"a": "tool a\\x0ab", "b": "ok"}
    long = header_values({"a": "x" * 600, "b": "y" * 600}, limit=1000)  # together over the limit, each within it
    assert long == {"a": "x" * 600, "b": "y" * 600}
    assert header_values({"a": "x" * 1200})["a"].endswith("... (1,200 characters)")
