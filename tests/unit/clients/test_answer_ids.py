"""The ids of translated answers: unique in a process and across forked workers, 24 hex digits."""

from __future__ import annotations

import os
import re

from router.clients.exchange import answer_id


def test_ids_are_24_hex_digits_and_never_repeat_in_a_process():
    ids = [answer_id() for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{24}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_forked_worker_draws_its_own_prefix():
    parent = answer_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, to the parent
        os.write(write, answer_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    os.close(read)
    assert child[:12] != parent[:12] and child != answer_id()
