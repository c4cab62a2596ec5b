"""Already in context: what an earlier tool result of the conversation shows already. Lossless
while those results are visible (the reduction lists them). Pure.

* **The same output.** A result equal to an earlier one's visible text becomes
  ``[pinch-router: same output as the earlier call bash {"command": "cat src/a.py"}]``.
* **Runs of lines.** A run of at least ``min_run_lines`` lines and ``min_run_chars`` characters
  found verbatim in one earlier result (a file re-read, a test re-run, a search repeated)
  becomes ``[pinch-router: 69 lines omitted here, the same as lines 30–98 of the earlier call …]``.
  Line numbers that ``grep -n`` or ``cat -n`` put before the lines do not stop a match: the pointer
  then says how this output numbers them (:mod:`~router.core.first_sight.numbering`).
* **A diff.** A result mostly the same as one earlier result (a file re-read after an edit, a
  test re-run after a fix) becomes that result's unified diff to this one, under a line
  naming the call, when that is shorter than the runs.

The model is told a call by its tool name and arguments as it wrote them, never by message
number: ``(its 2nd run)`` is added when several earlier calls read the same. A failure line
(:data:`~router.core.first_sight.errors.FAILURE_LINE`) stays in place: a run stops before it, the
same output holding one is pointed at run by run around it, and a diff must show it.
:class:`EarlierIndex` holds the earlier results' lines by content (line → its latest places),
built once per conversation and extended result by result, so finding the runs of a
40,000-line output costs a dictionary lookup a line. The index of one request serves the next
request of the conversation (:meth:`EarlierIndex.continued_by`): only the results sent since are
indexed, not the whole conversation again on every turn.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence

from router.core.first_sight.errors import FAILURE_LINE
from router.core.first_sight.line_diff import unified_diff
from router.core.first_sight.model import MARKER_OPEN, EarlierResult, FirstSightSettings, Reduced
from router.core.first_sight.numbering import line_key, numbering_note

# A run: this text's lines [start, end) are the earlier result's lines from `first` on, numbered as `note` says ("": verbatim).
Run = tuple[int, int, int, int, str]

# What a failure line is matched as: nothing an earlier result holds (a line never holds a line break).
_BARRIER = "\n"
# Ordinals for "(its 2nd run)"
_SUFFIXES = {1: "st", 2: "nd", 3: "rd"}


def same_output_marker(label: str) -> str:
    return f"{MARKER_OPEN}same output as the earlier call {label}]"


def run_marker(lines: int, first: int, last: int, label: str, note: str = "") -> str:
    if note:
        return f"{MARKER_OPEN}{lines} lines omitted here: lines {first}–{last} of the earlier call {label}, {note}]"
    return f"{MARKER_OPEN}{lines} lines omitted here, the same as lines {first}–{last} of the earlier call {label}]"


def diff_marker(label: str) -> str:
    return f"{MARKER_OPEN}the output of the earlier call {label}, changed as this unified diff shows (- earlier, + now)]"


class EarlierIndex:
    """The earlier tool results of one conversation, indexed for :func:`point_at_earlier` (module doc).

    Add them oldest first (:meth:`add`); the index is a function of what was added, in that order.
    ``settings`` fixes which lines are indexed (``min_anchor_chars``, ``max_occurrences``) and how
    calls are named (``max_label_chars``): use the same settings to reduce.
    """

    def __init__(self, results: Iterable[EarlierResult] = (), settings: FirstSightSettings | None = None) -> None:
        self.settings = settings or FirstSightSettings()
        self.results: list[EarlierResult] = []
        self.lines: list[list[str]] = []
        self.keys: list[list[str]] = []  # each line without its line number (numbering.line_key)
        self.labels: list[str] = []
        self._same_label: dict[str, list[int]] = {}
        self._whole: dict[str, int] = {}  # visible text → its latest result
        self._places: dict[str, list[tuple[int, int]]] = {}  # anchor line → its latest (result, line) places
        for result in results:
            self.add(result)

    def add(self, result: EarlierResult) -> None:
        position = len(self.results)
        lines = result.text.split("\n")
        label = call_label(result.tool_name, result.arguments, self.settings.max_label_chars)
        self.results.append(result)
        self.lines.append(lines)
        keys = [line_key(line) for line in lines]
        self.keys.append(keys)
        self.labels.append(label)
        self._same_label.setdefault(label, []).append(position)
        self._whole[result.text] = position
        min_anchor, cap = self.settings.min_anchor_chars, self.settings.max_occurrences
        places = self._places
        for number, line in enumerate(keys):
            if len(line) >= min_anchor and len(line.strip()) >= min_anchor and MARKER_OPEN not in line:
                found = places.get(line)
                if found is None:
                    places[line] = [(position, number)]
                else:
                    found.append((position, number))
                    if len(found) > cap:
                        del found[0]

    def __len__(self) -> int:
        return len(self.results)

    def continued_by(self, results: Sequence[EarlierResult], settings: FirstSightSettings) -> bool:
        """Whether ``results`` begin with every result this index holds, in its order, under the same
        ``settings``: then this index, extended with the rest of them (:meth:`add`), is the one they
        make. An index is extended in place, so one that another request extended past them holds a
        result they do not begin with, and is not theirs (build a new one)."""
        held = len(self.results)
        return settings == self.settings and held <= len(results) and all(map(operator.eq, self.results, results[:held]))

    def same_text(self, text: str) -> int | None:
        """The latest earlier result whose visible text is ``text``, if any."""
        return self._whole.get(text)

    def places(self, key: str) -> list[tuple[int, int]]:
        """Where an anchor line (its :func:`line_key`) stands in the earlier results: (result, line number from 0), latest last."""
        return self._places.get(key, [])

    def name(self, position: int) -> str:
        """How the model is told an earlier call: its label, with ``(its 2nd run)`` when several read the same."""
        label = self.labels[position]
        same = self._same_label[label]
        if len(same) == 1:
            return label
        run = same.index(position) + 1
        suffix = "th" if 10 <= run % 100 <= 20 else _SUFFIXES.get(run % 10, "th")
        return f"{label} (its {run}{suffix} run)"


def call_label(tool_name: str, arguments: str, max_chars: int) -> str:
    """``bash {"command": "cat src/a.py"}``: a tool call as the model wrote it, cut to ``max_chars``."""
    label = f"{tool_name} {arguments}".strip() if arguments else tool_name
    label = " ".join(label.split())  # a heredoc's line breaks would read as the pointer's end
    return label if len(label) <= max_chars else label[: max_chars - 1] + "…"


def point_at_earlier(text: str, index: EarlierIndex) -> Reduced | None:
    """The text with what earlier results show already replaced by pointers to them, or its diff
    to the one it mostly repeats, whichever is shorter; None when nothing is shorter."""
    lines = text.split("\n")
    same = index.same_text(text)
    if same is None:
        runs, shared = _runs(lines, index, frozenset())
        if not runs and _diff_base(shared, len(text), lines, index) is None:
            return None  # nothing to point at: no need to look for failure lines
    failures = FAILURE_LINE.numbers(text, lines)
    if same is not None and not failures:
        marker = same_output_marker(index.name(same))
        if len(marker) < len(text):
            return Reduced(marker, f"{len(text)} characters: the same output as an earlier call", (index.results[same].call_id,))
        return None
    if same is not None or failures:
        runs, shared = _runs(lines, index, frozenset(failures))  # again, a failure line now stopping a run
    best: Reduced | None = None
    if runs:
        best = _with_pointers(lines, runs, index)
    base = _diff_base(shared, len(text), lines, index)
    if base is not None:
        diffed = _diff(lines, base, index, [lines[number] for number in failures])
        if diffed is not None and (best is None or len(diffed.text) < len(best.text)):
            best = diffed
    return best if best is not None and len(best.text) < len(text) else None


def _runs(lines: list[str], index: EarlierIndex, failures: frozenset[int]) -> tuple[list[Run], dict[int, int]]:
    """The runs worth a pointer, in order; and per earlier result, the characters of this text's
    anchor lines it holds (to choose a diff's base). Lines match by :func:`line_key`; a run whose
    lines differ from the earlier ones (their numbers) needs a :func:`numbering_note`; no run holds
    one of the ``failures`` (line numbers)."""
    settings = index.settings
    min_lines, min_chars, min_anchor = settings.min_run_lines, settings.min_run_chars, settings.min_anchor_chars
    keys = [line_key(line) for line in lines]
    for number in failures:
        keys[number] = _BARRIER  # matches no earlier line: a run stops before it
    runs: list[Run] = []
    shared: dict[int, int] = {}
    count = len(lines)
    done = 0  # lines before this are in a run already
    i = 0
    while i < count:
        key = keys[i]
        places = index.places(key) if len(key) >= min_anchor else None
        if not places:
            i += 1
            continue
        for position in dict.fromkeys(position for position, _ in places):
            shared[position] = shared.get(position, 0) + len(key) + 1
        start, end, position, first = _longest_run(keys, i, done, places, index)
        run_chars = sum(len(line) + 1 for line in lines[start:end])
        if end - start >= min_lines and run_chars >= min_chars:
            earlier = index.lines[position][first : first + end - start]
            note = "" if lines[start:end] == earlier else numbering_note(lines[start:end])
            if note is not None:
                runs.append((start, end, position, first, note))
                shared[position] += run_chars - len(key) - 1  # the run's other lines, skipped from here on
                done = i = end
                continue
        i += 1
    return runs, shared


def _longest_run(keys: list[str], i: int, done: int, places: list[tuple[int, int]], index: EarlierIndex) -> tuple[int, int, int, int]:
    """The longest run through line ``i`` (not before ``done``) that one of ``places`` continues:
    (start, end, earlier result, its first line); on a tie the latest result, the nearest to this one."""
    count = len(keys)
    best = (i, i + 1, *places[-1])
    best_length = 0
    for position, number in reversed(places):
        earlier = index.keys[position]
        back = 0
        while i - back > done and number - back > 0 and keys[i - back - 1] == earlier[number - back - 1]:
            back += 1
        ahead = 1
        while i + ahead < count and number + ahead < len(earlier) and keys[i + ahead] == earlier[number + ahead]:
            ahead += 1
        if back + ahead > best_length:
            best_length, best = back + ahead, (i - back, i + ahead, position, number - back)
    return best


def _with_pointers(lines: list[str], runs: list[Run], index: EarlierIndex) -> Reduced | None:
    out: list[str] = []
    points: set[int] = set()
    pointed_lines = 0
    previous_end = 0
    previous_position = None
    for start, end, position, first, note in runs:
        # a pointer to the call the one before points at names it again in a few words
        name = "named above" if position == previous_position else index.name(position)
        marker = run_marker(end - start, first + 1, first + end - start, name, note)
        if len(marker) >= sum(len(line) + 1 for line in lines[start:end]) - 1:
            continue  # a long call name can make the pointer no shorter than the lines
        out.extend(lines[previous_end:start])
        out.append(marker)
        points.add(position)
        previous_position = position
        pointed_lines += end - start
        previous_end = end
    if not points:
        return None
    out.extend(lines[previous_end:])
    ids = tuple(index.results[position].call_id for position in sorted(points))
    return Reduced("\n".join(out), f"{pointed_lines} lines shown by {len(ids)} earlier call(s)", ids)


def _diff_base(shared: dict[int, int], chars: int, lines: list[str], index: EarlierIndex) -> int | None:
    """The earlier result this text mostly repeats (holding at least half of it), if a diff against it may pay."""
    if not shared or len(lines) > index.settings.diff_max_lines:
        return None
    position = max(shared, key=lambda p: (shared[p], p))  # the most shared; on a tie, the latest
    earlier = index.results[position].text
    if 2 * shared[position] < chars or len(index.lines[position]) > index.settings.diff_max_lines or MARKER_OPEN in earlier:
        return None
    return position


def _diff(lines: list[str], position: int, index: EarlierIndex, failures: list[str]) -> Reduced | None:
    """The text as the unified diff from an earlier result to it; None when a failure line would not show."""
    settings = index.settings
    diff = unified_diff(index.lines[position], lines, settings.diff_context, settings.diff_max_edits)
    if not diff:
        return None
    shown = {line[1:] for line in diff if line[:1] in " +"}
    if any(failure not in shown for failure in failures):
        return None
    changed = sum(1 for line in diff if line[:1] in "+-")
    text = "\n".join([diff_marker(index.name(position)), *diff])
    return Reduced(text, f"all but {changed} changed lines shown by an earlier call", (index.results[position].call_id,))
