"""First sight's repeated-lines reducer: runs fold to one copy and a count, and nothing is lost."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from router.core.first_sight.repeated_lines import MAX_STEPPING_DIGITS, fold_repeated_lines, repeat_marker
from tests.support.first_sight_fixtures import fixture, unfold

WARNING = "WARNING: Running pip as the 'root' user can result in broken permissions and conflicting behaviour"


def test_a_line_repeated_back_to_back_keeps_one_copy_and_the_count():
    text = "\n".join(["Collecting sqlparse", *[WARNING] * 58, "done"])
    reduced = fold_repeated_lines(text, max_period=4)
    assert reduced is not None
    assert reduced.text.split("\n") == ["Collecting sqlparse", WARNING, "[pinch-router: the line above repeated 57 more times]", "done"]
    assert reduced.removed == "57 repeated lines in 1 runs"
    assert unfold(reduced.text) == text


def test_a_block_repeated_folds_as_a_block():
    # the frames of a real recursion traceback (tests/data/first_sight/traceback_run.json's shape), repeated
    frames = ['  File "/testbed/django/utils/connection.py", line 15, in __getattr__', "    return getattr(self._connections[self._alias], item)"]
    text = "\n".join(["Traceback (most recent call last):", *frames * 40, "RecursionError: maximum recursion depth exceeded"])
    reduced = fold_repeated_lines(text, max_period=4)
    assert reduced is not None
    assert reduced.text.split("\n") == ["Traceback (most recent call last):", *frames, "[pinch-router: the 2 lines above repeated 39 more times]", "RecursionError: maximum recursion depth exceeded"]
    assert unfold(reduced.text) == text


def test_lines_whose_numbers_step_evenly_keep_the_first_and_the_last():
    text = "\n".join(f"Epoch {i}/50 - step {100 * i} - lr 0.1" for i in range(1, 51))
    reduced = fold_repeated_lines(text, max_period=4)
    assert reduced is not None
    lines = reduced.text.split("\n")
    assert lines[0] == "Epoch 1/50 - step 100 - lr 0.1"
    assert lines[-1] == "Epoch 50/50 - step 5000 - lr 0.1"
    assert len(lines) == 3
    assert unfold(reduced.text) == text


def test_numbers_that_do_not_step_evenly_stay():
    timestamps = "\n".join(f"12:00:{s:02d} heartbeat ok" for s in range(50, 60)) + "\n12:01:00 heartbeat ok"
    measured = "\n".join(f"request {i} took {t} ms" for i, t in enumerate([12, 15, 11, 19, 14, 12, 13]))
    padded = "\n".join(f"item {i:03d} of the batch processed" for i in range(1, 30))  # its width would be lost
    assert fold_repeated_lines(timestamps, max_period=4) is None
    assert fold_repeated_lines(measured, max_period=4) is None
    assert fold_repeated_lines(padded, max_period=4) is None


def test_lines_with_many_digits_are_not_tried_for_steps():
    text = "\n".join(f"2024-05-01 12:00:00,{i:03d} id={1000 + i} took {1 + i}ms" for i in range(1, 30))
    assert len(text.split("\n")[0]) - len(text.split("\n")[0].translate(str.maketrans("", "", "0123456789"))) > MAX_STEPPING_DIGITS
    assert fold_repeated_lines(text, max_period=4) is None


def test_a_fold_that_would_not_be_shorter_is_not_made():
    assert fold_repeated_lines("ok\nok\nok", max_period=4) is None
    assert len(repeat_marker(1, 2)) > len("ok\nok")


def test_a_real_file_view_has_nothing_to_fold():
    for result in fixture("file_then_part")["results"]:
        assert fold_repeated_lines(result["text"], max_period=4) is None


_LINES = st.sampled_from(["", "ok", "  File \"a.py\", line 3, in f", "    return f(n - 1)", WARNING, "step 1 of 9", "step 2 of 9", "}"])


@given(st.lists(st.tuples(st.lists(_LINES, min_size=1, max_size=3), st.integers(1, 30)), max_size=8))
def test_folding_loses_nothing_and_never_grows(blocks):
    text = "\n".join(line for block, times in blocks for _ in range(times) for line in block)
    reduced = fold_repeated_lines(text, max_period=4)
    if reduced is None:
        return
    assert len(reduced.text) < len(text)
    assert unfold(reduced.text) == text
