"""First sight's content router: each new tool result through the reducers once, with exact
accounting, and the properties that make recording it once safe: deterministic, idempotent, never
longer, lossless when it says so, failures always in place."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.first_sight import (
    EarlierIndex,
    EarlierResult,
    FirstSightSettings,
    NewResult,
    Rule,
    reduce_at_first_sight,
)
from router.core.first_sight.errors import ERROR_LINE, FAILURE_LINE
from router.core.first_sight.model import text_tokens
from router.core.first_sight.numbering import line_key
from tests.support.first_sight_fixtures import earlier_results, expand, fixture, fixture_text, new_result

LOSSY = FirstSightSettings(long_output_chars=2_000, head_chars=300, tail_chars=400, relevant_chars=300)


@pytest.mark.parametrize("name", ["same_output", "file_then_part", "file_read_twice", "grep_renumbered", "test_run_repeated"])
def test_a_real_repeat_is_pointed_at_losslessly_with_exact_accounting(name):
    earlier = earlier_results(name)[:-1]
    result = new_result(name)
    reduction = reduce_at_first_sight(result, earlier)
    assert reduction is not None
    assert reduction.rules == (Rule.ALREADY_IN_CONTEXT,)
    assert reduction.lossless and reduction.needs_original_visible
    assert set(reduction.points_at) <= {r.call_id for r in earlier}
    assert (reduction.chars_before, reduction.chars_after) == (len(result.text), len(reduction.text))
    assert (reduction.tokens_before, reduction.tokens_after) == (text_tokens(result.text), text_tokens(reduction.text))
    assert reduction.steps[0].chars_before == len(result.text)
    assert expand(reduction.text, earlier) == result.text


def test_terminal_noise_alone_is_lossless_and_points_at_nothing():
    reduction = reduce_at_first_sight(NewResult(fixture_text("tqdm_progress"), "bash", '{"command": "python index.py"}'))
    assert reduction is not None
    assert reduction.rules == (Rule.TERMINAL_NOISE,)
    assert reduction.lossless and not reduction.needs_original_visible
    assert reduction.steps[0].removed == "1 redrawn lines"


def test_a_long_output_is_cut_only_when_lossy_is_allowed_and_a_retrieve_id_given():
    text = fixture("file_then_part")["results"][0]["text"]
    result = NewResult(text, "bash", '{"command": "cat src/sqlfluff/rules/L036.py"}')
    assert reduce_at_first_sight(result, settings=LOSSY) is None
    assert reduce_at_first_sight(result, settings=LOSSY, allow_lossy=True) is None  # no id to retrieve it by
    reduction = reduce_at_first_sight(result, (), ["fix L036 select_targets"], LOSSY, allow_lossy=True, retrieve_id="call_7")
    assert reduction is not None
    assert reduction.rules == (Rule.LONG_OUTPUT,)
    assert not reduction.lossless
    assert 'pinch_retrieve("call_7") returns the whole output]' in reduction.text.split("\n")[0]


def test_a_rewrite_that_saves_too_little_is_not_made():
    text = "\x1b[32mok\x1b[0m\n" + fixture("file_then_part")["results"][1]["text"]
    assert reduce_at_first_sight(NewResult(text)) is None  # 9 characters of colour: not worth a rewrite
    assert reduce_at_first_sight(NewResult(text), settings=FirstSightSettings(min_saved_tokens=1, min_saved_share=0)) is not None


def test_a_result_equal_to_an_earlier_one_as_the_tool_returned_it_is_pointed_at_before_any_cleanup():
    text = fixture_text("pytest_color")
    earlier = [EarlierResult("c1", "bash", '{"command": "pytest -q"}', text)]
    reduction = reduce_at_first_sight(NewResult(text), earlier)
    assert reduction is not None
    assert reduction.rules == (Rule.ALREADY_IN_CONTEXT,)


def test_reduced_text_is_not_reduced_again_and_neither_is_pinch_output():
    name = "grep_renumbered"
    reduction = reduce_at_first_sight(new_result(name), earlier_results(name)[:-1])
    assert reduction is not None
    assert reduce_at_first_sight(NewResult(reduction.text), earlier_results(name)[:-1]) is None
    assert reduce_at_first_sight(NewResult("head\n[... pinch-router removed 4000 characters ...]\ntail" * 50)) is None


def test_settings_out_of_range_and_an_index_built_otherwise_are_refused():
    with pytest.raises(ValueError, match="min_run_lines=0"):
        FirstSightSettings(min_run_lines=0)
    with pytest.raises(ValueError, match="min_saved_share=1"):
        FirstSightSettings(min_saved_share=1)
    index = EarlierIndex(settings=FirstSightSettings(min_anchor_chars=4))
    with pytest.raises(ValueError, match="other settings"):
        reduce_at_first_sight(NewResult("x"), index)


def test_an_index_kept_from_result_to_result_gives_what_the_list_gives():
    earlier = earlier_results("file_read_twice")[:-1]
    index = EarlierIndex()
    for result in earlier:
        index.add(result)
    assert reduce_at_first_sight(new_result("file_read_twice"), index) == reduce_at_first_sight(new_result("file_read_twice"), earlier)


# --- properties over generated conversations ---

_FILE = [f"    line_{i} = compute(value_{i}, option={i % 3})" for i in range(40)]
_POOL = [
    *_FILE,
    "Traceback (most recent call last):",
    '  File "src/app/models.py", line 12, in save',
    "ValueError: bad value for field",
    "FAILED tests/test_models.py::test_save - ValueError",
    "collected 12 items",
    "",
    "}",
    "ok",
]


@st.composite
def conversations(draw):
    """Earlier results cut from a pool of lines (plain, numbered as grep -n and cat -n would), and a new
    result made of pieces of them, new lines and repeats."""

    def numbered(lines, style, start):
        if style == "grep":
            return [f"{start + i}{draw(st.sampled_from(':-'))}{line}" for i, line in enumerate(lines)]
        if style == "cat":
            return [f"{start + i:>6}\t{line}" for i, line in enumerate(lines)]
        return lines

    def piece():
        start = draw(st.integers(0, len(_POOL) - 1))
        end = draw(st.integers(start, min(len(_POOL), start + 30)))
        return numbered(_POOL[start:end], draw(st.sampled_from(["plain", "grep", "cat"])), draw(st.integers(1, 900)))

    earlier = [
        EarlierResult(f"call_{k}", "bash", f'{{"command": "step {draw(st.integers(0, 3))}"}}', "\n".join(piece()))
        for k in range(draw(st.integers(0, 4)))
    ]
    new: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["piece", "earlier", "repeat"]))
        if kind == "earlier" and earlier:
            new.extend(draw(st.sampled_from(earlier)).text.split("\n"))
        elif kind == "repeat":
            new.extend([draw(st.sampled_from(_POOL))] * draw(st.integers(1, 40)))
        else:
            new.extend(piece())
    return earlier, "\n".join(new)


CHEAP = FirstSightSettings(min_saved_tokens=1, min_saved_share=0, long_output_chars=800, head_chars=150, tail_chars=150, relevant_chars=100)


@settings(max_examples=150, deadline=None)
@given(conversations(), st.booleans())
def test_reducing_is_deterministic_idempotent_and_never_longer(conversation, lossy):
    earlier, text = conversation
    result = NewResult(text, "bash", "{}")
    query = ["fix ValueError in src/app/models.py", "line_12 compute"]
    first = reduce_at_first_sight(result, earlier, query, CHEAP, allow_lossy=lossy, retrieve_id="id")
    assert first == reduce_at_first_sight(result, EarlierIndex(earlier, CHEAP), query, CHEAP, allow_lossy=lossy, retrieve_id="id")
    if first is None:
        return
    assert len(first.text) < len(text)
    assert reduce_at_first_sight(NewResult(first.text), earlier, query, CHEAP, allow_lossy=lossy, retrieve_id="id") is None
    kept = set(first.text.split("\n"))
    # a failure line stays in place: as it is, or as a line of a diff (context or added)
    assert all(kept & {line, f" {line}", f"+{line}"} for line in text.split("\n") if FAILURE_LINE.holds(line))


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_a_lossless_reduction_gives_every_line_back_from_the_results_it_names(conversation):
    earlier, text = conversation
    reduction = reduce_at_first_sight(NewResult(text), earlier, settings=CHEAP)
    if reduction is None:
        return
    assert reduction.lossless
    named = [r for r in earlier if r.call_id in reduction.points_at]
    assert len(named) == len(reduction.points_at)
    assert expand(reduction.text, earlier) == text


@settings(max_examples=100, deadline=None)
@given(conversations())
def test_in_lossy_mode_every_error_line_is_kept_or_in_a_result_pointed_at(conversation):
    earlier, text = conversation
    reduction = reduce_at_first_sight(NewResult(text), earlier, ["ValueError"], CHEAP, allow_lossy=True, retrieve_id="id")
    if reduction is None:
        return
    kept = set(reduction.text.split("\n"))
    pointed = {line_key(line) for r in earlier if r.call_id in reduction.points_at for line in r.text.split("\n")}
    # a pointer may stand for an error line (a traceback's frame seen before, numbered otherwise), never a cut
    assert all(line in kept or line_key(line) in pointed for line in text.split("\n") if ERROR_LINE.holds(line))
