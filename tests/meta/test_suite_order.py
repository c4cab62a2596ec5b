"""The suite's longest files run first (tests/conftest.py): each one named there is a test file."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST

TESTS = Path(__file__).resolve().parents[1]


def test_every_file_named_to_run_first_exists() -> None:
    # a renamed or mistyped file would silently run in its place again, maybe last
    assert [name for name in LONGEST_FIRST if not (TESTS / name).is_file()] == []
