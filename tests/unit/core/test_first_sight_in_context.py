"""First sight's already-in-context reducer: what an earlier result shows becomes a pointer to its
call, or a diff, and the model can always get every line back from the results it names."""

from __future__ import annotations

import pytest

from router.core.first_sight import EarlierIndex, EarlierResult, FirstSightSettings
from router.core.first_sight.in_context import call_label, point_at_earlier
from router.core.first_sight.numbering import line_key, numbering_note
from tests.support.first_sight_fixtures import apply_unified_diff, earlier_results, expand, fixture, new_result


def reduced_fixture(name: str):
    earlier = earlier_results(name)[:-1]
    text = new_result(name).text
    return text, earlier, point_at_earlier(text, EarlierIndex(earlier))


def test_the_same_output_again_is_a_pointer_naming_the_call_by_its_tool_and_arguments():
    text, earlier, reduced = reduced_fixture("same_output")
    assert reduced is not None
    # the arguments as the model wrote them (JSON: its line breaks escaped), runs of spaces made one
    assert reduced.text.startswith('[pinch-router: same output as the earlier call edit {"command": "edit 287:295\\n required_elements = [\\n \'BitsAllocated\'')
    assert reduced.text.endswith("…]")
    assert "message" not in reduced.text
    assert reduced.points_at == (earlier[0].call_id,)
    assert expand(reduced.text, earlier) == text


def test_a_part_of_a_file_read_whole_before_is_a_pointer_to_its_lines():
    text, earlier, reduced = reduced_fixture("file_then_part")
    assert reduced is not None
    assert reduced.text.split("\n") == [
        "<returncode>0</returncode>",
        "<output>",
        '[pinch-router: 21 lines omitted here, the same as lines 118–138 of the earlier call bash {"command": "cat src/sqlfluff/rules/L036.py"}]',
        "</output>",
    ]
    assert expand(reduced.text, earlier) == text


def test_a_file_read_again_after_an_edit_keeps_only_the_changed_line():
    text, earlier, reduced = reduced_fixture("file_read_twice")
    assert reduced is not None
    lines = reduced.text.split("\n")
    assert len(lines) == 3
    assert lines[1] == '            auto_name = schema_editor._create_index_name(table_name, columns, suffix="_idx")'
    assert lines[2].endswith("of the earlier call named above]")
    assert reduced.points_at == (earlier[1].call_id,)  # the same read before the edit, not the older one
    assert expand(reduced.text, earlier) == text


def test_a_test_rerun_points_at_the_frames_and_keeps_its_new_failure_in_place():
    text, earlier, reduced = reduced_fixture("test_run_repeated")
    assert reduced is not None
    lines = reduced.text.split("\n")
    assert "TypeError: unsupported operand type(s) for %: 'NoneType' and 'DictWrapper'" in lines
    assert "FAILED (errors=1)" in lines
    assert "ERROR: test_fk_collation_propagation (__main__.ReproductionTestCase)" in lines
    assert "Traceback (most recent call last):" in lines
    assert expand(reduced.text, earlier) == text


def test_a_result_that_fails_as_before_still_shows_its_failure():
    text = new_result("test_run_repeated").text
    earlier = [EarlierResult("c1", "bash", '{"command": "python3 reproduce_issue.py"}', text)]
    reduced = point_at_earlier(text, EarlierIndex(earlier))
    assert reduced is None or "TypeError: unsupported operand type(s) for %: 'NoneType' and 'DictWrapper'" in reduced.text.split("\n")


def test_lines_numbered_by_grep_are_found_in_an_earlier_grep_and_their_numbers_are_said():
    text, earlier, reduced = reduced_fixture("grep_renumbered")
    assert reduced is not None
    assert "numbered 879–900 as grep -n numbers them, ':' on 882–883, 885, 888, 890, 895 and '-' on the others]" in reduced.text
    assert len(reduced.text) < len(text) / 3
    assert expand(reduced.text, earlier) == text


def test_a_diff_is_sent_when_it_is_shorter_than_the_pointers():
    # short lines, a change every few: runs too short to point at, a compact diff
    before = [f"    x{i} = {i}" for i in range(120)]
    after = [f"    x{i} = {i * 2}" if i % 9 == 0 else line for i, line in enumerate(before)]
    earlier = [EarlierResult("c1", "bash", '{"command": "cat vars.py"}', "\n".join(before))]
    reduced = point_at_earlier("\n".join(after), EarlierIndex(earlier))
    assert reduced is not None
    first, *diff = reduced.text.split("\n")
    assert first == '[pinch-router: the output of the earlier call bash {"command": "cat vars.py"}, changed as this unified diff shows (- earlier, + now)]'
    assert apply_unified_diff(before, diff) == "\n".join(after)
    assert expand(reduced.text, earlier) == "\n".join(after)


def test_several_earlier_calls_alike_are_told_apart_by_their_run():
    text = new_result("file_then_part").text
    whole = fixture("file_then_part")["results"][0]
    other = EarlierResult("c0", "bash", whole["arguments"], "something else entirely")
    earlier = [other, EarlierResult(whole["call_id"], "bash", whole["arguments"], whole["text"])]
    reduced = point_at_earlier(text, EarlierIndex(earlier))
    assert reduced is not None
    assert '"cat src/sqlfluff/rules/L036.py"} (its 2nd run)]' in reduced.text
    assert expand(reduced.text, earlier) == text


def test_nothing_in_common_gives_none():
    index = EarlierIndex(earlier_results("file_then_part"))
    assert point_at_earlier(new_result("grep_renumbered").text, index) is None


def test_a_short_run_is_not_worth_a_pointer():
    earlier = [EarlierResult("c1", "bash", "{}", "alpha line one\nbeta line two\ngamma three")]
    assert point_at_earlier("alpha line one\nbeta line two\nsomething new", EarlierIndex(earlier)) is None


def test_the_index_remembers_a_line_at_its_latest_places():
    settings = FirstSightSettings(max_occurrences=2)
    index = EarlierIndex([EarlierResult(f"c{i}", "bash", "{}", "a line that repeats") for i in range(5)], settings)
    assert index.places("a line that repeats") == [(3, 0), (4, 0)]
    assert index.same_text("a line that repeats") == 4


@pytest.mark.parametrize(
    ("tool", "arguments", "label"),
    [
        ("bash", '{"command": "cat src/a.py"}', 'bash {"command": "cat src/a.py"}'),
        ("read_file", "", "read_file"),
        ("bash", '{"command": "cat <<EOF\n  x\nEOF"}', 'bash {"command": "cat <<EOF x EOF"}'),
        ("bash", '{"command": "' + "y" * 200 + '"}', 'bash {"command": "' + "y" * 141 + "…"),
    ],
)
def test_a_call_is_named_by_tool_and_arguments_on_one_line_cut_to_size(tool, arguments, label):
    assert call_label(tool, arguments, 160) == label


@pytest.mark.parametrize(
    ("line", "key"),
    [("882:    def f():", "    def f():"), ("882-    x = 1", "    x = 1"), ("   882\tdef f():", "def f():"), ("  12→y", "y"), ("plain", "plain"), ("", "")],
)
def test_a_line_key_is_the_line_without_its_number(line, key):
    assert line_key(line) == key


@pytest.mark.parametrize(
    ("lines", "note"),
    [
        (["a", "b"], "without line numbers"),
        (["882:a", "883-b", "884-c", "885:d"], "numbered 882–885 as grep -n numbers them, ':' on 882, 885 and '-' on the others"),
        (["7:a", "8:b"], "numbered 7–8 as grep -n numbers matching lines (':')"),
        (["7-a", "8-b"], "numbered 7–8 as grep -n numbers context lines ('-')"),
        (["     1\ta", "     2\tb"], "numbered 1–2 as cat -n numbers lines"),
        (["     9→a", "    10→b"], "numbered 9–10 as cat -n does, with → for its tab"),
        (["1:a", "3:b"], None),  # not consecutive
        (["1:a", "b"], None),  # mixed
        (["1\ta", "2\tb"], None),  # not cat -n's layout
    ],
)
def test_how_a_run_is_numbered_is_said_exactly_or_not_at_all(lines, note):
    assert numbering_note(lines) == note


def test_an_index_serves_results_that_begin_with_all_it_holds_under_the_same_settings():
    results = [EarlierResult(f"c{i}", "bash", "{}", f"output {i}\nsecond line of {i}") for i in range(4)]
    index = EarlierIndex(results[:2])
    assert index.continued_by(results, FirstSightSettings())
    assert index.continued_by(results[:2], FirstSightSettings())
    assert not index.continued_by(results[:1], FirstSightSettings())  # it holds one they do not
    assert not index.continued_by([results[0], results[2], *results[3:]], FirstSightSettings())
    assert not index.continued_by([results[0], EarlierResult("c1", "bash", "{}", "changed"), *results[2:]], FirstSightSettings())
    assert not index.continued_by(results, FirstSightSettings(min_anchor_chars=99))
