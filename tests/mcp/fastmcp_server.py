"""An MCP server written with the MCP Python SDK's FastMCP, for the MCP client's tests.

Runs under target/mcp/venv (scripts/mcp-servers installs it, with the pinned `mcp` package):

    target/mcp/venv/bin/python tests/mcp/fastmcp_server.py              # stdio
    target/mcp/venv/bin/python tests/mcp/fastmcp_server.py --http PORT  # streamable HTTP

Over stdio, stdout carries the protocol and nothing else. With `--http PORT` it serves streamable
HTTP (stateful: sessions by `mcp-session-id`, replies as SSE) at http://127.0.0.1:PORT/mcp; PORT 0
picks a free port. Once the socket listens it writes one line `listening <port>` to stderr (the
port actually bound), so a test can wait for that line instead of sleeping.

Its initialize result advertises `capabilities.tools.listChanged: true`.

Tools:
  echo(text: str)                  text content: the text, unchanged.
  add(a: int, b: int)              structured content {"sum": a + b} (with an outputSchema) and the
                                   same JSON as text.
  fail(reason: str)                a result with isError true whose one text content is the reason.
  slow(seconds: float, steps: int) sleeps `seconds` in `steps` equal steps; after each one sends
                                   notifications/progress (progress i, total steps, message
                                   "step i of n") when the request carries _meta.progressToken,
                                   then returns the text "slept <seconds> s in <steps> steps".
  grow()                           registers the tool `extra_tool` (returns the text "extra") and
                                   sends notifications/tools/list_changed on the call's own
                                   stream (related to the request, so it reaches an HTTP client
                                   without a GET stream); returns the text "grown".

Events: when the environment names a file in MCP_EVENTS_FILE, `slow` appends one JSON line per
event to it: {"event": "started"|"finished"|"cancelled", "tool": "slow", "request_id": "<the
call's JSON-RPC id, as a string>", "pid": <the server's pid>}. "cancelled" is written when the
call is cancelled (notifications/cancelled from the client, or the session ending) while it
runs. This SDK then still answers the cancelled request, with a JSON-RPC error (code 0,
"Request cancelled"): a client must drop a reply to a request it gave up.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import TypedDict

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.lowlevel.server import NotificationOptions
from mcp.types import CallToolResult, TextContent, ToolListChangedNotification

server = FastMCP("voqalize-fastmcp-fixture", host="127.0.0.1", streamable_http_path="/mcp", log_level="WARNING")

# FastMCP advertises tools.listChanged false by default; `grow` does change the list.
_plain_options = server._mcp_server.create_initialization_options


def _options_with_list_changed(notification_options=None, experimental_capabilities=None):
    return _plain_options(notification_options or NotificationOptions(tools_changed=True), experimental_capabilities)


server._mcp_server.create_initialization_options = _options_with_list_changed


def record(event: str, request_id: object) -> None:
    """Appends one event line to $MCP_EVENTS_FILE, if set (flushed and closed at once)."""
    path = os.environ.get("MCP_EVENTS_FILE")
    if not path:
        return
    line = json.dumps({"event": event, "tool": "slow", "request_id": request_id, "pid": os.getpid()})
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


class Sum(TypedDict):
    sum: int


@server.tool()
def echo(text: str) -> str:
    """Returns the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> Sum:
    """Adds two integers; the result is structured: {"sum": a + b}."""
    return {"sum": a + b}


@server.tool()
def fail(reason: str) -> CallToolResult:
    """Fails as a tool does: a result with isError true carrying the reason as text."""
    return CallToolResult(content=[TextContent(type="text", text=reason)], isError=True)


@server.tool()
async def slow(seconds: float, steps: int, ctx: Context) -> str:
    """Sleeps `seconds` in `steps` steps, reporting progress after each; records its events."""
    request_id = ctx.request_id
    record("started", request_id)
    try:
        if steps <= 0:
            await anyio.sleep(seconds)
        for i in range(1, max(steps, 0) + 1):
            await anyio.sleep(seconds / steps)
            await ctx.report_progress(i, steps, f"step {i} of {steps}")
    except anyio.get_cancelled_exc_class():
        record("cancelled", request_id)
        raise
    record("finished", request_id)
    return f"slept {seconds} s in {steps} steps"


def extra_tool() -> str:
    """A tool that `grow` adds at run time."""
    return "extra"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `extra_tool` and tells the client the tool list changed."""
    if server._tool_manager.get_tool("extra_tool") is None:
        server.add_tool(extra_tool, name="extra_tool")
    await ctx.session.send_notification(
        ToolListChangedNotification(method="notifications/tools/list_changed"),
        related_request_id=ctx.request_id,
    )
    return "grown"


async def serve_http(port: int) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    # Connections made from now on wait in the backlog until uvicorn accepts them.
    print(f"listening {sock.getsockname()[1]}", file=sys.stderr, flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp (0: any)")
    args = parser.parse_args()
    if args.http is None:
        server.run("stdio")
    else:
        anyio.run(serve_http, args.http)


if __name__ == "__main__":
    main()
