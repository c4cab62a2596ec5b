"""First sight's terminal-noise reducer: what a terminal draws and a model cannot use goes, nothing else."""

from __future__ import annotations

import re

import pytest

from router.core.first_sight.terminal_noise import remove_terminal_noise
from tests.support.first_sight_fixtures import fixture_text

# pip 20's legacy bar, printed line by line to a log (hand-made in its format: pip needs the network to draw one)
PIP_LOG = """Collecting sqlparse
  Downloading sqlparse-0.4.4-py3-none-any.whl (41 kB)
     |████████                        | 10 kB 1.2 MB/s eta 0:00:01
     |████████████████                | 20 kB 1.9 MB/s eta 0:00:01
     |████████████████████████        | 30 kB 2.6 MB/s eta 0:00:01
     |████████████████████████████████| 41 kB 3.1 MB/s
Installing collected packages: sqlparse
Successfully installed sqlparse-0.4.4"""


def test_a_real_colored_pytest_run_loses_its_escape_sequences_and_nothing_else():
    captured = fixture_text("pytest_color")
    reduced = remove_terminal_noise(captured)
    assert reduced is not None
    assert "\x1b" not in reduced.text
    assert reduced.text == re.sub(r"\x1b\[[0-9;]*m", "", captured)  # its only escapes are colours
    assert "E       assert 2 == 3" in reduced.text.split("\n")
    assert "FAILED test_sample.py::test_parse_header - assert 2 == 3" in reduced.text.split("\n")
    assert reduced.removed.endswith("escape sequences")


def test_a_real_tqdm_bar_redrawn_with_carriage_returns_keeps_its_last_state():
    reduced = remove_terminal_noise(fixture_text("tqdm_progress"))
    assert reduced is not None
    assert reduced.text == "Indexing files: 100%|███████████████████████████| 40/40 [00:00<00:00, 97.08it/s]\nindexed 40 files\n"
    assert reduced.removed == "1 redrawn lines"


def test_a_bar_printed_line_by_line_keeps_its_final_state_and_the_lines_around_it():
    reduced = remove_terminal_noise(PIP_LOG)
    assert reduced is not None
    lines = reduced.text.split("\n")
    assert lines == [
        "Collecting sqlparse",
        "  Downloading sqlparse-0.4.4-py3-none-any.whl (41 kB)",
        "     |████████████████████████████████| 41 kB 3.1 MB/s",
        "Installing collected packages: sqlparse",
        "Successfully installed sqlparse-0.4.4",
    ]
    assert reduced.removed == "3 superseded progress lines"


def test_docker_pull_progress_keeps_the_last_state_of_each_layer():
    log = "\n".join(
        [
            "a1b2: Downloading [=====>                 ]  1.2MB/4.5MB",
            "a1b2: Downloading [===========>           ]  2.2MB/4.5MB",
            "a1b2: Pull complete",
        ]
    )
    reduced = remove_terminal_noise(log)
    assert reduced is not None
    assert reduced.text.split("\n") == ["a1b2: Downloading [===========>           ]  2.2MB/4.5MB", "a1b2: Pull complete"]


@pytest.mark.parametrize(
    "text",
    [
        "tests/test_a.py ........ [ 10%]\ntests/test_a.py ........ [ 20%]",  # pytest's progress: tests passed
        "| name | 1 |      |\n| name | 2 |      |",  # a table's rows
        "same line 10%|████| eta 1s\nsame line 10%|████| eta 1s",  # identical: repeated lines count them
        "line one\r\nline two\r\n",  # a CRLF file: the \r is the file's, not a redraw
        "plain output\nwith no noise at all",
    ],
)
def test_what_is_not_noise_stays(text):
    assert remove_terminal_noise(text) is None


def test_window_titles_links_and_charset_switches_go_too():
    text = "\x1b]0;build\x07start\x1b(B\x1b[m \x1b]8;;https://example.org\x1b\\link\x1b]8;;\x1b\\ end"
    reduced = remove_terminal_noise(text)
    assert reduced is not None
    assert reduced.text == "start link end"


def test_a_spinner_keeps_its_last_frame():
    text = "⠋ Resolving dependencies 1/30\n⠙ Resolving dependencies 9/30\n⠹ Resolving dependencies 30/30\ndone"
    reduced = remove_terminal_noise(text)
    assert reduced is not None
    assert reduced.text == "⠹ Resolving dependencies 30/30\ndone"


def test_reducing_twice_changes_nothing_more():
    for name in ("pytest_color", "tqdm_progress"):
        once = remove_terminal_noise(fixture_text(name))
        assert once is not None
        assert remove_terminal_noise(once.text) is None
