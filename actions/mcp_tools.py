"""The guarded-actions tool an MCP session may hold: stage an exact plan for approval.

It lives on the actions side because memory must not import actions; the
project's composition module (``aetnaweb.mcp``) adds it next to the memory
tools. Approving, committing and aborting stay with people in the dashboard,
so there is deliberately no tool for them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from actions import services
from actions.api_schemas import OperationIn
from actions.errors import ActionError
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from memory.mcp_server import Context, _call, tool_registrar

STAGE_DESCRIPTION = (
    "Stage an exact plan (a world patch) at this session's scope for a person to approve in "
    "the dashboard. Nothing executes now: in enforce mode the plan waits for approval; observe "
    "and preview plans are recorded and can never execute. Each operation names an adapter "
    "(e.g. filesystem), its operation (e.g. write_text), its arguments, the evidence it relies "
    "on and the keys it depends on. A plan that breaks the guard policy or names an unknown "
    "adapter is refused as a whole and nothing is written. Returns the plan with its "
    "transaction_id and plan_hash."
)


def add_action_tools(server: MCPServer, principal: Principal, scope: Scope) -> None:
    """Register ``stage_plan`` when ``principal`` holds ``stage`` at ``scope``."""
    at = str(scope)
    tool = tool_registrar(server, principal, scope)

    @tool(
        access.STAGE,
        "Stage an action plan for approval",
        read_only=False,
        description=STAGE_DESCRIPTION,
    )
    def stage_plan(
        operations: Annotated[list[OperationIn], Field(min_length=1, max_length=100)],
        mode: Literal["observe", "preview", "enforce"] = "enforce",
        session_id: Context = None,
        turn_id: Context = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            try:
                return services.stage(
                    scope=at,
                    operations=[operation.model_dump() for operation in operations],
                    mode=mode,
                    session_id=session_id,
                    turn_id=turn_id,
                    principal=principal,
                ).as_dict()
            except ActionError as exc:
                raise ToolError(str(exc)) from exc

        return _call(run)
