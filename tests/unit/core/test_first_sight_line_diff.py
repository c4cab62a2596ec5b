"""The unified diff first sight sends for an output mostly the same as an earlier one: minimal, and
applying it gives the new output back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from router.core.first_sight.line_diff import unified_diff
from tests.support.first_sight_fixtures import apply_unified_diff, fixture


def test_a_changed_line_shows_with_its_context_as_diff_u_writes_it():
    old = list("abcdefghij")
    new = list("abXdefghiYj")
    assert unified_diff(old, new, context=1, max_edits=10) == ["@@ -2,3 +2,3 @@", " b", "-c", "+X", " d", "@@ -9,2 +9,3 @@", " i", "+Y", " j"]


def test_lines_added_at_the_start_and_removed_at_the_end():
    assert unified_diff(["a", "b"], ["x", "a"], context=0, max_edits=10) == ["@@ -0,0 +1 @@", "+x", "@@ -2 +2,0 @@", "-b"]


def test_equal_lines_give_no_hunk_and_too_many_changes_give_none():
    assert unified_diff(["a", "b"], ["a", "b"], context=2, max_edits=0) == []
    assert unified_diff(list("abcdef"), list("uvwxyz"), context=2, max_edits=5) is None


def test_a_real_file_read_again_after_an_edit():
    results = fixture("file_read_twice")["results"]
    old, new = results[1]["text"].split("\n"), results[2]["text"].split("\n")
    diff = unified_diff(old, new, context=2, max_edits=64)
    assert diff == [
        "@@ -22,5 +22,5 @@",
        "             # Generate auto-generated name for the index",
        "             table_name = model._meta.db_table",
        "-            auto_name = schema_editor._create_index_name(table_name, columns)",
        '+            auto_name = schema_editor._create_index_name(table_name, columns, suffix="_idx")',
        "             ",
        "             # Create index object with the auto-generated name",
    ]
    assert apply_unified_diff(old, diff) == "\n".join(new)


_LINE = st.sampled_from(["a", "b", "c", "", "x = 1", "}"])


@given(st.lists(_LINE, max_size=40), st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["drop", "add", "change"]), _LINE), max_size=8), st.integers(0, 3))
def test_applying_the_diff_gives_the_new_lines(old, edits, context):
    new = list(old)
    for where, what, line in edits:
        at = min(where, len(new))
        if what == "add":
            new.insert(at, line)
        elif new and at < len(new):
            if what == "drop":
                del new[at]
            else:
                new[at] = line
    diff = unified_diff(old, new, context, max_edits=len(old) + len(new))
    assert diff is not None
    assert apply_unified_diff(old, diff) == "\n".join(new)
    assert sum(1 for line in diff if line[:1] in "+-") <= 2 * len(edits)
