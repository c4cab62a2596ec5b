"""Translations between wire formats, keyed by (client wire, provider wire): bodies, answers and streams.

One module per pair, named client_to_provider (the answer's translation back lives with it), the
chained pairs that go through chat in :mod:`.chained`, the protocol in :mod:`.protocol` and the one
registry in :mod:`.registry`. Pure: the ids and the clock an answer needs come in (``AnswerIds``).
"""
