"""A developer's check of tests/mcp/fastmcp_server.py (not run by CI): drives it with the MCP
Python SDK's own client, over stdio and over streamable HTTP, and asserts what the README says.

    scripts/mcp-servers && target/mcp/venv/bin/python tests/mcp/check_fastmcp.py

Prints one line per check and "fastmcp_server: all checks passed" at the end; exits non-zero
(with a traceback) on the first failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent
SERVER = HERE / "fastmcp_server.py"
WAIT = 30  # seconds: a generous bound on every wait, for a loaded machine


def ok(transport: str, what: str) -> None:
    print(f"ok [{transport}] {what}", flush=True)


@asynccontextmanager
async def http_server(env: dict[str, str]):
    """Starts the server with --http 0 and yields its URL once it says `listening <port>`."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", "0"], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        line = await anyio.to_thread.run_sync(proc.stderr.readline)
        assert line.startswith("listening "), f"unexpected first stderr line: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=WAIT)


@asynccontextmanager
async def session(transport: str, env: dict[str, str], handler):
    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, message_handler=handler) as s:
                yield s
    else:
        async with http_server(env) as url:
            async with streamable_http_client(url) as (read, write, _):
                async with ClientSession(read, write, message_handler=handler) as s:
                    yield s


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def wait_for_event(path: Path, event: str) -> dict:
    with anyio.fail_after(WAIT):
        while True:
            for e in read_events(path):
                if e["event"] == event:
                    return e
            await anyio.sleep(0.05)


async def check(transport: str) -> None:
    events = Path(tempfile.mkdtemp()) / "events.jsonl"
    env = dict(os.environ, MCP_EVENTS_FILE=str(events))
    list_changed = anyio.Event()

    async def handler(message) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            list_changed.set()

    async with session(transport, env, handler) as s:
        init = await s.initialize()
        assert init.capabilities.tools and init.capabilities.tools.listChanged, init.capabilities
        ok(transport, f"initialize: protocol {init.protocolVersion}, tools.listChanged true")

        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == {"echo", "add", "fail", "slow", "grow"}, sorted(tools)
        assert tools["add"].outputSchema is not None
        ok(transport, f"tools/list: {sorted(tools)}")

        r = await s.call_tool("echo", {"text": "héllo"})
        assert not r.isError and r.content[0].text == "héllo", r
        ok(transport, "echo returns its text")

        r = await s.call_tool("add", {"a": 2, "b": 40})
        assert not r.isError and r.structuredContent == {"sum": 42}, r
        ok(transport, f"add: structuredContent {r.structuredContent}")

        r = await s.call_tool("fail", {"reason": "no such city"})
        assert r.isError and r.content[0].text == "no such city", r
        ok(transport, "fail: isError true, text is the reason")

        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append((p, total, message))

        r = await s.call_tool("slow", {"seconds": 0.3, "steps": 3}, progress_callback=on_progress)
        assert not r.isError and r.content[0].text == "slept 0.3 s in 3 steps", r
        assert progress == [(i, 3, f"step {i} of 3") for i in (1, 2, 3)], progress
        assert [e["event"] for e in read_events(events)] == ["started", "finished"], read_events(events)
        ok(transport, f"slow: progress {progress}, events started+finished")

        # Cancellation: the SDK's client does not send notifications/cancelled when its call is
        # cancelled, so the check sends it itself, with the request's id.
        first = anyio.Event()

        async def on_first(p: float, total: float | None, message: str | None) -> None:
            first.set()

        request_id = s._request_id  # the id the next request gets
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await s.call_tool("slow", {"seconds": 60, "steps": 600}, progress_callback=on_first)

            tg.start_soon(call)
            with anyio.fail_after(WAIT):
                await first.wait()
            await s.send_notification(
                types.ClientNotification(
                    types.CancelledNotification(
                        method="notifications/cancelled",
                        params=types.CancelledNotificationParams(requestId=request_id, reason="check"),
                    )
                )
            )
            tg.cancel_scope.cancel()
        e = await wait_for_event(events, "cancelled")
        assert str(e["request_id"]) == str(request_id), e
        ok(transport, f"slow cancelled by notifications/cancelled: event {e}")

        r = await s.call_tool("grow", {})
        assert r.content[0].text == "grown", r
        with anyio.fail_after(WAIT):
            await list_changed.wait()
        names = {t.name for t in (await s.list_tools()).tools}
        assert "extra_tool" in names, names
        r = await s.call_tool("extra_tool", {})
        assert r.content[0].text == "extra", r
        ok(transport, "grow: notifications/tools/list_changed, extra_tool listed and callable")


async def main() -> None:
    for transport in ("stdio", "http"):
        await check(transport)
    print("fastmcp_server: all checks passed")


if __name__ == "__main__":
    anyio.run(main)
