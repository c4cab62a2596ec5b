"""A stage owns what it declares: one defined only in this module — its settings model, its context slot,
its decision column — is registered and runs in a chain built from a config's ``middlewares:`` list,
with no central module edited (no field on RequestContext, no Config section, no Decision field, no
decision-log column, no list of names). The central places take each from the stage registry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, Field

from router.config import ConfigError
from router.contract.chain import ChainError
from router.contract.context import RequestContext
from router.core.results import Slot
from router.contract.stage import FailMode, StageReport
from router.core.errors import invalid_request
from router.core.results import StageRecord
from router.observe.decision_log import DecisionLog
from router.observe.decision_record import Column, Decision
from router.server.registry import REGISTRY
from tests.support.config import chat_body, model_entry


@dataclass(frozen=True)
class Census:
    """What the tool census found: the tools a request offers, and whether that is over the limit."""

    tools: int
    over: bool


CENSUS = Slot("tool_census", Census)


class CensusSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # More tools than this and census-gate refuses the request.
    max_tools: int = Field(default=8, ge=0)


class ToolCensus:
    """Counts the tools a request offers (the slot's one writer)."""

    name: ClassVar[str] = "tool-census"
    section: ClassVar[str] = "tool_census"
    requires: ClassVar[frozenset[str]] = frozenset({"view"})
    reads: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset({CENSUS.name})
    fail_mode: ClassVar[FailMode] = FailMode.OPEN
    columns: ClassVar[Mapping[str, Column]] = {"tool_census_tools": lambda ctx: census.tools if (census := ctx[CENSUS]) else None}

    def __init__(self, *, settings: CensusSettings) -> None:
        self.settings = settings
        self.timeout_seconds: float | None = 1.0

    async def run(self, ctx: RequestContext) -> StageReport:
        tools = len(ctx.view.tools or ())
        ctx[CENSUS] = Census(tools, tools > self.settings.max_tools)
        return StageReport(detail=f"{tools} tools")

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        pass  # no census: census-gate lets the request through


class CensusGate:
    """Refuses a request with too many tools: reads the census, typed, through the slot."""

    name: ClassVar[str] = "census-gate"
    section: ClassVar[str | None] = None
    requires: ClassVar[frozenset[str]] = frozenset({CENSUS.name})
    reads: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset({"response"})
    fail_mode: ClassVar[FailMode] = FailMode.OPEN
    timeout_seconds: float | None = 1.0

    async def run(self, ctx: RequestContext) -> StageReport | None:
        census: Census | None = ctx[CENSUS]
        if census is not None and census.over:
            ctx.response = ctx.error_response(invalid_request(f"{census.tools} tools is too many", code="too_many_tools", param="tools"))
            return StageReport(detail="refused")
        return None

    def fallback(self, ctx: RequestContext, reason: str) -> None:
        pass


STAGES = REGISTRY.with_stage(ToolCensus, before="capability-gate").with_stage(CensusGate, before="capability-gate")
CHAIN = ["session-fingerprint", "tool-census", "census-gate", "capability-gate", "upstream-forward"]


def raw_config(upstream_url: str = "http://127.0.0.1:9/v1", **sections: Any) -> dict[str, Any]:
    return {
        "middlewares": CHAIN,
        "providers": {"mock": {"base_url": upstream_url}},
        "models": [model_entry("main")],
        "upstream": {"connect_timeout_seconds": 10, "first_byte_timeout_seconds": 30, "idle_timeout_seconds": 30},
        "decision_log": {"path": ":memory:"},
        **sections,
    }


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


async def test_a_stage_defined_here_runs_in_the_chain_its_config_lists_with_its_settings_slot_and_column(proxy, mock_upstream):
    _, url = mock_upstream
    config = STAGES.parse_config(raw_config(url, tool_census={"max_tools": 1}), environ={})
    assert config.tool_census == CensusSettings(max_tools=1)  # type: ignore[attr-defined]
    client = await proxy(config, stages=STAGES)

    served = await client.post("/v1/chat/completions", json=chat_body("list the files", tools=[tool("ls")]))
    refused = await client.post("/v1/chat/completions", json=chat_body("list the files", tools=[tool("ls"), tool("cat")]))

    assert served.status == 200
    assert refused.status == 400 and (await refused.json())["error"]["code"] == "too_many_tools"
    rows = (await (await client.get("/v1/decisions")).json())["data"]  # newest first, from the decision log's table
    assert [row["tool_census_tools"] for row in rows] == [2, 1]
    assert [row["status"] for row in rows] == [400, 200]
    assert [[stage["stage"] for stage in row["stages"]] for row in rows] == [CHAIN[:3], CHAIN]
    assert rows[1]["stages"][1]["detail"] == "1 tools"


def test_its_section_is_as_strict_as_the_others_and_has_its_defaults():
    assert STAGES.parse_config(raw_config(), environ={}).tool_census == CensusSettings()  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"tool_census\.nonsense: Extra inputs are not permitted"):
        STAGES.parse_config(raw_config(tool_census={"nonsense": 1}), environ={})
    with pytest.raises(ConfigError, match=r"tool_census\.max_tools: Input should be greater than or equal to 0"):
        STAGES.parse_config(raw_config(tool_census={"max_tools": -1}), environ={})


def test_the_proxys_own_registry_knows_neither_its_name_nor_its_section():
    with pytest.raises(ConfigError, match="tool_census: Extra inputs are not permitted"):
        REGISTRY.parse_config(raw_config(tool_census={}), environ={})
    with pytest.raises(ChainError, match="middlewares\\[1\\]: unknown stage 'tool-census'"):
        REGISTRY.chain(CHAIN)
    assert "tool-census" not in REGISTRY.default_chain and "tool_census" not in REGISTRY.config_schema.model_fields


def test_its_slot_is_checked_in_the_order_like_any_field():
    with pytest.raises(ChainError, match="stage 'census-gate' requires 'tool_census'; 'tool-census' provides it but comes later"):
        STAGES.chain(["session-fingerprint", "census-gate", "tool-census", "capability-gate", "upstream-forward"])
    assert STAGES.default_chain[-4:-1] == ("tool-census", "census-gate", "capability-gate")
    assert STAGES.config_schema.model_fields["middlewares"].default_factory() == list(STAGES.default_chain)  # type: ignore[misc]


def stage_like(name: str, **declared: Any) -> type:
    return type(name, (ToolCensus,), {"name": name, "columns": {}, **declared})


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        (stage_like("census-again"), "stage 'census-again' provides 'tool_census', which 'tool-census' provides: a slot has one writer"),
        (stage_like("own-classifier", provides=frozenset({"classification"})), "provides 'classification', which 'classifier' provides"),
        (stage_like("tool-census"), "stage 'tool-census' is registered twice"),
        (stage_like("counter", provides=frozenset({"count"}), columns={"model": lambda ctx: 0}), "decision column 'model' is taken"),
        (stage_like("counter", provides=frozenset({"count"}), columns={"tool_census_tools": lambda ctx: 0}), "column 'tool_census_tools' is 'tool-census''s"),
        (stage_like("counter", provides=frozenset({"count"}), section="pinch"), "section 'pinch' is PinchSettings in the config, not CensusSettings"),
    ],
    ids=["second writer of its slot", "second writer of a built-in slot", "a name twice", "a Decision field", "another stage's column", "another section"],
)
def test_what_two_stages_would_share_is_refused_when_registered(stage, message):
    with pytest.raises(ValueError, match=message):
        STAGES.with_stage(stage)


async def test_a_decision_log_written_before_the_stage_was_registered_gets_its_column(tmp_path: Path):
    path = str(tmp_path / "decisions.sqlite3")
    before = DecisionLog(path)
    await before.start()
    before.submit(Decision("old", 1.0, 200, 1.0))
    await before.close()

    after = DecisionLog(path, stage_columns=("tool_census_tools",))
    await after.start()
    after.submit(Decision("new", 2.0, 200, 1.0, stages=(StageRecord("tool-census", "ok", 0.1),), stage_columns=(("tool_census_tools", 3),)))
    rows = await after.recent(10)
    await after.close()
    assert [(row["request_id"], row["tool_census_tools"]) for row in rows] == [("new", 3), ("old", None)]
