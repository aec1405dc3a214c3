"""Agent routes: which agents cannot run and why, and an operator's clearing of a halted one."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Path as PathParam
from psycopg_pool import ConnectionPool
from pydantic import BaseModel

from app import services
from app.api.common import get_pool
from app.auth import Identity, require_operator, require_user
from schema.models import MAX_NAME_CHARS

router = APIRouter(prefix="/api/agents", tags=["agents"])


class AgentProblemOut(BaseModel):
    agent: str
    reason: str
    halted: bool  # True: halted on what its runs showed; an operator may clear it


@router.get("/problems", response_model=list[AgentProblemOut])
async def get_agent_problems(_: Identity = Depends(require_user),
                             pool: ConnectionPool = Depends(get_pool)) -> list[AgentProblemOut]:
    """The agents nothing is claimed for (misconfigured or halted), and why: their tasks wait."""
    problems, halted = await services.agent_config_errors(pool), await services.halted_agents(pool)
    return [AgentProblemOut(agent=name, reason=reason, halted=name in halted)
            for name, reason in sorted(problems.items())]


@router.post("/{agent}/clear-halt", status_code=204,
             responses={403: {"description": "not an operator"}, 409: {"description": "not halted"}})
async def clear_halt(agent: str = PathParam(..., min_length=1, max_length=MAX_NAME_CHARS),
                     _: Identity = Depends(require_operator), pool: ConnectionPool = Depends(get_pool)) -> None:
    """Lets a halted agent's tasks be claimed again (after its endpoint or key was fixed)."""
    if "\x00" in agent:
        raise HTTPException(status_code=422, detail="Agent names must not contain a NUL character")
    if not await services.clear_agent_halt(pool, agent):
        raise HTTPException(status_code=409, detail=f"agent {agent!r} is not halted")
    services.forget_live(pool)
    return None
