"""A unified diff of two lists of lines, for outputs that are mostly the same. Pure.

Myers' O((N+M)·D) algorithm: fast when the two differ in few lines (a file re-read after an
edit, a test re-run), and it gives up past ``max_edits`` lines changed, where a diff would not be
short anyway. The hunks read as ``diff -u`` writes them (without the two file lines).
"""

from __future__ import annotations

# One edit script step: "=" a line kept, "-" a line of the old removed, "+" a line of the new added.
Opcode = tuple[str, int, int, int, int]  # tag, old start, old end, new start, new end (as difflib's opcodes)


def unified_diff(old: list[str], new: list[str], context: int, max_edits: int) -> list[str] | None:
    """The hunks turning ``old`` into ``new``, with ``context`` lines around each change; ``[]`` when they
    are equal; None when more than ``max_edits`` lines would be removed or added."""
    opcodes = _opcodes(old, new, max_edits)
    if opcodes is None:
        return None
    out: list[str] = []
    for group in _grouped(opcodes, context):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "=":
                out.extend(" " + line for line in old[i1:i2])
            else:
                out.extend("-" + line for line in old[i1:i2])
                out.extend("+" + line for line in new[j1:j2])
    return out


def _range(start: int, stop: int) -> str:
    """A hunk's range as diff -u writes it: ``start,length`` (1-based), ``start`` alone for one line,
    and for none the line before."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _opcodes(a: list[str], b: list[str], max_edits: int) -> list[Opcode] | None:
    """The edit script from ``a`` to ``b`` as opcodes ("=", or "!" for a replacement: removed then added)."""
    n, m = len(a), len(b)
    offset = max_edits + 1
    v = [0] * (2 * max_edits + 3)
    trace: list[list[int]] = []
    for d in range(max_edits + 1):
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                x = v[offset + k + 1]  # down: a line of b added
            else:
                x = v[offset + k - 1] + 1  # right: a line of a removed
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[offset + k] = x
            if x >= n and y >= m:
                trace.append(v[:])
                return _merged(_backtrack(trace, n, m, offset))
        trace.append(v[:])
    return None


def _backtrack(trace: list[list[int]], n: int, m: int, offset: int) -> list[tuple[str, int, int]]:
    """The path found, as steps ("=", "-" or "+", with the line of a and of b before the step), first to last."""
    x, y = n, m
    steps: list[tuple[str, int, int]] = []
    for d in range(len(trace) - 1, 0, -1):
        v = trace[d - 1]
        k = x - y
        previous_k = k + 1 if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]) else k - 1
        previous_x = v[offset + previous_k]
        previous_y = previous_x - previous_k
        while x > previous_x and y > previous_y:
            x, y = x - 1, y - 1
            steps.append(("=", x, y))
        if x == previous_x:
            steps.append(("+", x, previous_y))
        else:
            steps.append(("-", previous_x, y))
        x, y = previous_x, previous_y
    while x > 0 and y > 0:
        x, y = x - 1, y - 1
        steps.append(("=", x, y))
    steps.reverse()
    return steps


def _merged(steps: list[tuple[str, int, int]]) -> list[Opcode]:
    """Steps as opcodes: runs of kept lines, and runs of changes ("!") between them."""
    opcodes: list[Opcode] = []
    for tag, x, y in steps:
        kind = "=" if tag == "=" else "!"
        end_x, end_y = x + (tag != "+"), y + (tag != "-")
        if opcodes and opcodes[-1][0] == kind:
            _, i1, _, j1, _ = opcodes[-1]
            opcodes[-1] = (kind, i1, end_x, j1, end_y)
        else:
            opcodes.append((kind, x, end_x, y, end_y))
    return opcodes


def _grouped(opcodes: list[Opcode], context: int) -> list[list[Opcode]]:
    """The changes in hunks, each with up to ``context`` kept lines around it (as difflib groups them)."""
    groups: list[list[Opcode]] = []
    group: list[Opcode] = []
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "=":
            first, last = index == 0, index == len(opcodes) - 1
            if first and last:
                return []
            if first:
                i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
            elif last:
                i2, j2 = min(i2, i1 + context), min(j2, j1 + context)
            elif i2 - i1 > 2 * context:  # a long kept stretch ends one hunk and starts the next
                group.append((tag, i1, i1 + context, j1, j1 + context))
                groups.append(group)
                group = []
                i1, j1 = i2 - context, j2 - context
            if i2 > i1:
                group.append((tag, i1, i2, j1, j2))
        else:
            group.append((tag, i1, i2, j1, j2))
    if group and any(tag != "=" for tag, *_ in group):
        groups.append(group)
    return groups
