"""First sight's long-output cut (lossy): head, tail, every error line and the lines the task names stay
verbatim; the rest is one pinch_retrieve away, and the markers say how much was cut where."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.evidence import evidence_terms
from router.core.first_sight import FirstSightSettings
from router.core.first_sight.errors import ERROR_LINE, is_error_line, is_failure_line
from router.core.first_sight.long_output import cut_long_output, gap_marker
from tests.support.first_sight_fixtures import fixture, new_result

SMALL = FirstSightSettings(long_output_chars=1000, head_chars=200, tail_chars=300, relevant_chars=200)
ROOT = Path(__file__).resolve().parents[3]


def queries(*texts: str) -> list[frozenset[str]]:
    return [evidence_terms(text) for text in texts]


def service_log(lines: int = 40_000) -> str:
    """A 40,000-line service log: request lines, a heartbeat, and in the middle the real traceback of
    tests/data/first_sight/traceback_run.json (its <output> part), then a test runner's verdict."""
    traceback = new_result("traceback_run").text.split("<output>\n", 1)[1].removesuffix("\n</output>").split("\n")
    out = []
    for i in range(lines):
        if i == lines // 2:
            out.extend(traceback)
            out.append("FAILED tests/test_items.py::test_get_item - ModuleNotFoundError: No module named 'sqlparse'")
        elif i % 97 == 0:
            out.append(f"2024-05-01 12:{i // 3600 % 60:02d}:{i // 60 % 60:02d} INFO  [worker-{i % 8}] heartbeat ok")
        elif i == 31_337:
            out.append("2024-05-01 13:10:00 WARN  [worker-3] slow query in django/db/backends/sqlite3/introspection.py")
        else:
            out.append(f"2024-05-01 12:{i // 3600 % 60:02d}:{i // 60 % 60:02d} INFO  [worker-{i % 8}] GET /api/items/{(i * 7919) % 5000} 200 {(i * 31) % 900}ms")
    return "\n".join(out)


def test_a_40000_line_log_keeps_head_tail_errors_and_what_the_task_names():
    log = service_log()
    lines = log.split("\n")
    task = queries("ModuleNotFoundError when importing django/db/backends/sqlite3/introspection.py", "python manage.py runserver")
    reduced = cut_long_output(log, task, FirstSightSettings(), "call_42")
    assert reduced is not None
    out = reduced.text.split("\n")
    kept = set(out)
    cut = len(lines) - sum(1 for line in out if not line.startswith("[pinch-router: "))
    assert out[0] == f'[pinch-router: {cut} lines cut (of {len(lines)}); pinch_retrieve("call_42") returns the whole output]'
    assert lines[0] in kept and lines[-1] in kept
    errors = [line for line in lines if is_error_line(line)]
    assert len(errors) > 20  # the traceback's frames, its exception line, the verdict
    assert all(line in kept for line in errors)
    assert "2024-05-01 13:10:00 WARN  [worker-3] slow query in django/db/backends/sqlite3/introspection.py" in kept
    assert len(reduced.text) < 12_000
    cuts = [int(line.split()[1]) for line in out[1:] if line.startswith("[pinch-router: ") and line.endswith("cut here]")]
    assert sum(cuts) == cut


def test_a_real_traceback_keeps_every_frame_and_its_exception():
    # a real file's listing (file_then_part.json), then the real traceback of traceback_run.json
    text = fixture("file_then_part")["results"][0]["text"] + "\n" + new_result("traceback_run").text
    reduced = cut_long_output(text, [], FirstSightSettings(long_output_chars=1000, head_chars=100, tail_chars=100, relevant_chars=0), "c")
    assert reduced is not None
    kept = reduced.text.split("\n")
    frames = [line for line in text.split("\n") if line.startswith('  File "')]
    assert len(frames) == 23
    assert all(frame in kept for frame in frames)
    assert "    django.setup()" in kept  # a frame's source line
    assert "                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^" in kept  # and its caret line
    assert "ModuleNotFoundError: No module named 'sqlparse'" in kept
    assert "Traceback (most recent call last):" in kept
    assert len(reduced.text) < len(text) / 2


def test_the_line_holding_a_rarer_term_of_the_task_is_kept_first():
    filler = [f"row {i} nothing to see here at all" for i in range(200)]
    filler[50] = "common_name appears here"
    filler[60] = "common_name and rare_name appear here"
    filler[70] = "common_name appears again"
    text = "\n".join(filler)
    budget = FirstSightSettings(long_output_chars=1000, head_chars=50, tail_chars=50, relevant_chars=40)
    reduced = cut_long_output(text, queries("fix rare_name", "look at common_name"), budget, "c")
    assert reduced is not None
    kept = reduced.text.split("\n")
    assert "common_name and rare_name appear here" in kept
    assert "common_name appears here" not in kept


def test_a_short_output_is_not_cut():
    assert cut_long_output("short\noutput", [], SMALL, "c") is None


def test_a_gap_of_a_short_line_keeps_the_line_instead_of_a_marker():
    # the head keeps the first line only; the third is an error line: between them, one short line
    text = "\n".join(["x" * 150, "ok", "ValueError: " + "y" * 240, *[f"line {i} of padding text here" for i in range(60)]])
    reduced = cut_long_output(text, [], FirstSightSettings(long_output_chars=500, head_chars=152, tail_chars=100, relevant_chars=0), "c")
    assert reduced is not None
    assert reduced.text.split("\n")[1:4] == ["x" * 150, "ok", "ValueError: " + "y" * 240]
    assert gap_marker(1) not in reduced.text


def test_our_pointer_lines_are_never_cut():
    pointer = '[pinch-router: 40 lines omitted here, the same as lines 1–40 of the earlier call bash {"command": "cat a.py"}]'
    text = "\n".join([*(f"line {i} of something" for i in range(100)), pointer, *(f"line {i} more" for i in range(100))])
    reduced = cut_long_output(text, [], SMALL, "c")
    assert reduced is not None
    assert pointer in reduced.text.split("\n")


def test_the_two_error_sets_one_inside_the_other():
    for line in ["Traceback (most recent call last):", "ValueError: bad", "sqlfluff.core.errors.SQLParseError: bad", "FAILED tests/a.py::t - x",
                 "E       assert 2 == 3", "src/a.c:3:5: error: expected ';'", "npm ERR! code ENOENT", "ERROR: test_x (m.T)"]:
        assert is_failure_line(line) and is_error_line(line), line
    for line in ['  File "a.py", line 3, in f', "    raise ValueError(x)", "    assert x == 1"]:
        assert is_error_line(line) and not is_failure_line(line), line
    for line in ["all good", "errors = 0", "    self.name: str = ''", "2024-05-01 12:00:00 INFO ok"]:
        assert not is_error_line(line), line


_LINES = st.sampled_from(
    ["ok", "GET /api/items 200", "  File \"a.py\", line 3, in f", "ValueError: bad value", "FAILED t.py::x", "src/app/models.py updated",
     "E       assert 1 == 2", "row of some data", "", "Traceback (most recent call last):"]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_LINES, min_size=1, max_size=300), st.sampled_from(["", "fix src/app/models.py"]))
def test_every_error_line_stays_verbatim_and_the_cut_is_shorter(lines, task):
    text = "\n".join(lines)
    reduced = cut_long_output(text, queries(task), SMALL, "id")
    if reduced is None:
        return
    assert len(reduced.text) < len(text)
    kept = set(reduced.text.split("\n"))
    assert all(line in kept for line in lines if ERROR_LINE.holds(line))


def test_the_same_inputs_give_the_same_bytes_whatever_the_hash_seed():
    program = (
        "import hashlib, sys\n"
        "sys.path.insert(0, '.')\n"
        "from tests.unit.core.test_first_sight_long_output import service_log, queries\n"
        "from router.core.first_sight import FirstSightSettings\n"
        "from router.core.first_sight.long_output import cut_long_output\n"
        "task = queries('ModuleNotFoundError in django/db/backends/sqlite3/introspection.py worker_3 GET_items', 'grep heartbeat_ok items/42')\n"
        "print(hashlib.sha256(cut_long_output(service_log(4000), task, FirstSightSettings(), 'x').text.encode()).hexdigest())\n"
    )
    digests = {
        subprocess.run([sys.executable, "-c", program], cwd=ROOT, env={"PYTHONHASHSEED": seed, "PATH": ""}, capture_output=True, text=True, check=True).stdout
        for seed in ("1", "2", "3")
    }
    assert len(digests) == 1
    assert len(next(iter(digests)).strip()) == 64
