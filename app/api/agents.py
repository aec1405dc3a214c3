"""Agents: list them, pause or resume one, see which cannot run and why, and clear a halted one."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Depends, HTTPException
from fastapi import Path as PathParam
from psycopg_pool import ConnectionPool
from pydantic import BaseModel, Field, computed_field

from app import actions, services
from app.api.common import get_pool
from app.api.schemas import model_of
from app.auth import Identity, require_operator, require_user
from schema.errors import InvalidArgument, UnknownAgent
from schema.models import MAX_NAME_CHARS, Agent

router = APIRouter(prefix="/api", tags=["agents"])


class _AgentBase(BaseModel):
    model_config = {"from_attributes": True}

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy refuses it
    @property
    def paused(self) -> bool:
        """Whether the agent is paused now: its running tasks finish, nothing new starts."""
        since, until = self.paused_at, self.paused_until  # type: ignore[attr-defined]
        return since is not None and (until is None or until > datetime.now(UTC))


AgentOut = model_of(Agent, "AgentOut", base=_AgentBase, exclude=("settings",))


class PauseIn(BaseModel):
    """How long and why: without `until` the pause lasts until a resume."""

    until: datetime | None = Field(None, description="resume by itself at this time (ISO 8601; UTC if no zone)")
    reason: str | None = Field(None, max_length=500, description="shown beside the agent and its waiting tasks")


class AgentProblemOut(BaseModel):
    agent: str
    reason: str
    halted: bool  # True: halted on what its runs showed; an operator may clear it


AGENT_NAME = PathParam(..., min_length=1, max_length=MAX_NAME_CHARS)


def _no_nul(name: str) -> None:
    if "\x00" in name:
        raise HTTPException(status_code=422, detail="Agent names must not contain a NUL character")


@router.get("/agents", response_model=list[AgentOut])  # type: ignore[valid-type]
async def list_agents(_: Identity = Depends(require_user), pool: ConnectionPool = Depends(get_pool)):
    """Every agent with its limits and whether it is paused."""
    return [AgentOut.model_validate(a) for a in await services.agents(pool)]


@router.get("/agents/problems", response_model=list[AgentProblemOut])
async def get_agent_problems(_: Identity = Depends(require_user),
                             pool: ConnectionPool = Depends(get_pool)) -> list[AgentProblemOut]:
    """The agents nothing is claimed for (misconfigured or halted), and why: their tasks wait."""
    problems, halted = await services.agent_config_errors(pool), await services.halted_agents(pool)
    return [AgentProblemOut(agent=name, reason=reason, halted=name in halted)
            for name, reason in sorted(problems.items())]


@router.post("/agents/{name}/pause", response_model=AgentOut,
             responses={403: {"description": "not an operator"}, 404: {"description": "no such agent"}})
async def pause_agent(body: PauseIn, name: str = AGENT_NAME, who: Identity = Depends(require_operator),
                      pool: ConnectionPool = Depends(get_pool)):
    """Pauses an agent, until `until` or a resume: running tasks finish, nothing new starts."""
    _no_nul(name)
    until = body.until if body.until is None or body.until.tzinfo else body.until.replace(tzinfo=UTC)
    if until is not None and until <= datetime.now(UTC):
        raise HTTPException(status_code=422, detail="The time to resume must be in the future")
    try:
        agent = await actions.pause_agent(pool, name, actor=who.actor, until=until, reason=body.reason)
    except UnknownAgent as exc:
        raise HTTPException(status_code=404, detail=f"There is no agent named {name!r}") from exc
    except (InvalidArgument, ValueError) as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    return AgentOut.model_validate(agent)


@router.post("/agents/{name}/resume", response_model=AgentOut,
             responses={403: {"description": "not an operator"}, 404: {"description": "no such agent"}})
async def resume_agent(name: str = AGENT_NAME, _: Identity = Depends(require_operator),
                       pool: ConnectionPool = Depends(get_pool)):
    """Ends an agent's pause at once: its waiting tasks start again."""
    _no_nul(name)
    try:
        agent = await actions.resume_agent(pool, name)
    except UnknownAgent as exc:
        raise HTTPException(status_code=404, detail=f"There is no agent named {name!r}") from exc
    return AgentOut.model_validate(agent)


@router.post("/agents/{name}/clear-halt", status_code=204,
             responses={403: {"description": "not an operator"}, 409: {"description": "not halted"}})
async def clear_halt(name: str = AGENT_NAME, _: Identity = Depends(require_operator),
                     pool: ConnectionPool = Depends(get_pool)) -> None:
    """Lets a halted agent's tasks be claimed again (after its endpoint or key was fixed)."""
    _no_nul(name)
    if not await actions.clear_agent_halt(pool, name):
        raise HTTPException(status_code=409, detail=f"Agent {name!r} is not halted: there is nothing to resume")
    services.forget_live(pool)
    return None
