"""Where every finished request goes: the decision log, the metrics, one log line.

Also answers ``POST /v1/outcome``: it finds the request's session (recent
requests from the session state — Redis, with ``state.backend: redis``, so an
outcome may be reported to any replica — older ones from the log) and feeds escalation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from aiohttp import web

from router.core.redaction import Redactor
from router.core.tenants import Tenant, may_see
from router.observe.decision_log import DecisionLog, OutcomeUpdate
from router.observe.decision_record import CLIENT_CLOSED, Column, Decision
from router.observe.logs import log_event
from router.observe.metrics import Metrics
from router.state.escalation import SessionEscalation
from router.state.remembered import RECENT_REQUESTS, remember_request
from router.state.session_store import LocalStore, SessionStore

log = logging.getLogger("pinch_router.request")


class Recorder:
    def __init__(
        self,
        metrics: Metrics,
        decision_log: DecisionLog | None,
        escalation: SessionEscalation | None,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        redactor: Redactor | None = None,
        state: SessionStore | None = None,
        columns: Sequence[tuple[str, Column]] = (),
    ) -> None:
        self.redactor = redactor or Redactor(())
        # the stages' declared decision columns (the stage registry's), read into every served request's record
        self.columns = tuple(columns)
        self.metrics = metrics
        self.decision_log = decision_log
        self.escalation = escalation
        self.clock = clock
        self.wall_clock = wall_clock
        self.state = state if state is not None else LocalStore()
        # Set when stopping cancels the requests still running: they did not leave, the proxy cut them.
        self.cutting_at_shutdown = False

    def record(self, decision: Decision) -> None:
        """Called once per request when its answer is complete. Never raises into a request.

        The decision is redacted first: the row, ``/v1/decisions`` and the log line all come from it.
        """
        if self.cutting_at_shutdown and decision.status == CLIENT_CLOSED:
            decision = replace(decision, status=503, error_code="server_shutdown")
        if self.redactor.any_in(_foreign_texts(decision)):  # rare: rebuilding the record costs ~100 µs
            decision = self.redactor.record(decision)
        if not decision.attempts:  # never went upstream, so upstream-forward did not queue it
            remember_request(self.state, decision.request_id, decision.session, decision.client, self.clock())
        self.state.flush_later()  # whatever the request still queued
        self.metrics.observe(decision)
        if self.decision_log is not None and not self.decision_log.submit(decision):
            self.metrics.decisions_dropped.inc()
        log_event(
            log,
            logging.INFO,
            "request",
            {
                "request_id": decision.request_id,
                "status": decision.status,
                "error_code": decision.error_code,
                "session": decision.session,
                "model": decision.model,
                "category": decision.category,
                "tier": decision.routed_tier,
                "source": decision.source,
                "pinch_saved": decision.pinch_saved,
                "stream": decision.stream,
                "duration_ms": decision.duration_ms,
                "overhead_ms": decision.overhead_ms,
            },
        )

    async def outcome(self, request_id: str, success: bool, reason: str | None, tenant: Tenant | None = None) -> bool:
        """Record a client-reported outcome; False when the request id is unknown — or is another
        client key's and ``tenant`` (the reporting key) may not see it: the same answer, so that a
        user key cannot tell another's request ids from ids that never were."""
        recent = await self.state.get(RECENT_REQUESTS, request_id, self.clock())
        if recent is None and self.decision_log is not None:
            recent = await self.decision_log.request_of(request_id)
        if recent is None or not may_see(tenant, recent.client):
            return False
        session = recent.session
        if self.decision_log is not None:
            self.decision_log.submit(OutcomeUpdate(request_id, success, reason, self.wall_clock()))
        if self.escalation is not None and session is not None:
            await self.escalation.record_outcome(session, success, self.clock())
        return True


def _foreign_texts(d: Decision) -> list[str | None]:
    """The decision's texts that did not come from the proxy or its config: where a secret could be."""
    return [
        d.requested_model,
        d.relevance_reason,
        d.stream_error,
        d.error_code,
        *(a.error for a in d.attempts),
        *(s.detail for s in d.stages),
        *(reason for r in d.rejected for reason in r.reasons),
        *(value for _, value in d.stage_columns if isinstance(value, str)),
    ]


# The app's recorder: its redactor is the one of the moment (a reload may bring new secrets).
RECORDER_KEY = web.AppKey("recorder", Recorder)
