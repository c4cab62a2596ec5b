"""Run a Python program with a bytecode counter, switched by signals (for bench_bytecodes).

    python -m bench.bytecode_counter OUT -m router serve --config bench.yaml
    python -m bench.bytecode_counter OUT bench/floor_proxy.py --port ...

SIGUSR1 starts counting (from zero), SIGUSR2 stops and writes to OUT, as JSON, the
bytecodes executed per function (every thread) and how often each was entered
(a coroutine counts once per resumption). Counting is deterministic where time
is not: it tells which code runs per request, and how much of it, without the
noise of a shared machine — but not what the C code under a bytecode costs.
"""

from __future__ import annotations

import collections
import json
import runpy
import signal
import sys
import threading
from types import CodeType, FrameType
from typing import Any

_on = False
_bytecodes: collections.Counter[CodeType] = collections.Counter()
_entries: collections.Counter[CodeType] = collections.Counter()


def _count(frame: FrameType, event: str, arg: Any) -> Any:
    if event == "opcode":
        _bytecodes[frame.f_code] += 1
    return _count


def _enter(frame: FrameType, event: str, arg: Any) -> Any:
    if not _on:
        return None
    frame.f_trace_opcodes = True
    _entries[frame.f_code] += 1
    return _count


def _start(*_: Any) -> None:
    global _on
    _bytecodes.clear()
    _entries.clear()
    _on = True


def _stop_and_write(out: str) -> None:
    global _on
    _on = False
    functions: dict[str, list[int]] = {}
    for code, n in list(_bytecodes.items()):
        # dataclasses' generated methods all live in "<string>": their fields tell them apart
        name = code.co_name + (f"({', '.join(code.co_varnames[1:5])})" if code.co_filename == "<string>" else "")
        key = f"{code.co_filename}:{code.co_firstlineno}:{name}"
        counted = functions.setdefault(key, [0, 0])
        counted[0] += n
        counted[1] += _entries.get(code, 0)
    with open(out, "w") as file:
        json.dump(functions, file)


def main() -> None:
    out, program = sys.argv[1], sys.argv[2:]
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, lambda *_: _stop_and_write(out))
    sys.settrace(_enter)
    threading.settrace(_enter)
    if program[0] == "-m":
        sys.argv = program[1:]
        runpy.run_module(program[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = program
        runpy.run_path(program[0], run_name="__main__")


if __name__ == "__main__":
    main()
