"""Long texts joined once per conversation (router.core.joined_text): always the join, the kept one for the same parts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from router.core import joined_text
from router.core.joined_text import MAX_CHARS, MIN_CHARS, joined


def long_parts() -> list[str]:
    return ["system prompt " * (MIN_CHARS // 10), "x" * 100, "more"]


def test_the_same_string_objects_get_the_text_joined_before():
    parts = long_parts()
    first = joined("\n\n", parts)
    assert first == "\n\n".join(parts)
    assert joined("\n\n", list(parts)) is first  # another list of the very strings: the kept text


def test_equal_but_other_strings_or_another_separator_are_joined_again():
    parts = long_parts()
    first = joined("\n", parts)
    copies = ["".join(part) for part in (p[:1] + p[1:] for p in parts)]  # equal texts, new objects
    assert copies[0] is not parts[0]
    again = joined("\n", copies)
    assert again == first and again is not first
    assert joined("\n\n", parts) == "\n\n".join(parts)


def test_short_and_huge_joins_are_not_kept():
    short = ["a", "b"]
    assert joined("\n", short) == "a\nb"
    huge = ["y" * MAX_CHARS, "z"]
    assert joined("\n", huge) == "\n".join(huge) and joined("\n", huge) is not joined("\n", huge)
    assert all(len(text) <= MAX_CHARS for _, _, text in joined_text._kept.values())


def test_the_kept_joins_are_bounded():
    for _ in range(joined_text.KEPT * 2):
        joined("\n", ["q" * MIN_CHARS + str(_), "r"])
    assert len(joined_text._kept) <= joined_text.KEPT


@given(st.sampled_from(["\n", "\n\n", ""]), st.lists(st.text(max_size=3000), max_size=5))
def test_it_is_always_the_join(separator, texts):
    assert joined(separator, texts) == separator.join(texts)
    assert joined(separator, texts) == separator.join(texts)  # kept or not
