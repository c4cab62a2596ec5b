"""The random hex of translated answers' ids: unique in a process and across forked workers, 24 hex digits."""

from __future__ import annotations

import os
import re

from router.clients.exchange import answer_id


def test_ids_are_24_hex_digits_and_no_prefix_repeats_in_a_process():
    """Translations take prefixes of it (Ollama's calls: ``call_<first 12>_<n>``): each must be unique too."""
    ids = [answer_id() for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{24}", i) for i in ids)
    assert len({i[:12] for i in ids}) == len(ids)


def test_a_forked_worker_draws_its_own_prefix():
    answer_id()  # the parent has drawn ids before it forks
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, to the parent
        os.write(write, answer_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    os.close(read)
    assert child != answer_id()  # not the parent's next one: the child seeded its own
