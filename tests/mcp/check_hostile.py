"""A developer's check of tests/mcp/hostile_server.py (not run by CI): drives every mode over raw
newline-delimited JSON-RPC and asserts what its docstring says. Python 3 stdlib only:

    python3 tests/mcp/check_hostile.py

Prints one line per mode and "hostile_server: all checks passed"; exits non-zero on a failure.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SERVER = Path(__file__).resolve().parent / "hostile_server.py"
WAIT = 30  # seconds: a generous bound on every wait


class Peer:
    def __init__(self, mode: str, env: dict[str, str] | None = None, stderr=subprocess.DEVNULL) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=dict(os.environ, **(env or {})),
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 1

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None) -> int:
        request_id = self.next_id
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def line(self, timeout: float = WAIT) -> bytes | None:
        return self.lines.get(timeout=timeout)

    def reply(self, request_id: int) -> dict:
        deadline = time.monotonic() + WAIT
        while True:
            line = self.line(deadline - time.monotonic())
            assert line is not None, "the server closed stdout"
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    def initialize(self, version: str = "2025-06-18") -> dict:
        r = self.reply(self.request("initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "check", "version": "0"}}))
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r["result"]

    def close(self) -> int:
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def tool_names(peer: Peer) -> list[str]:
    return [t["name"] for t in peer.reply(peer.request("tools/list"))["result"]["tools"]]


def call(peer: Peer, name: str = "t", meta: dict | None = None) -> int:
    params: dict = {"name": name, "arguments": {}}
    if meta:
        params["_meta"] = meta
    return peer.request("tools/call", params)


def ok(mode: str, what: str) -> None:
    print(f"ok [{mode}] {what}", flush=True)


def check_initialize() -> None:
    p = Peer("normal")
    for asked, got in [("2025-03-26", "2025-03-26"), ("2025-11-25", "2025-11-25"), ("1999-01-01", "2025-06-18")]:
        r = p.reply(p.request("initialize", {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "c", "version": "0"}}))
        assert r["result"]["protocolVersion"] == got, r
        assert r["result"]["capabilities"] == {"tools": {"listChanged": True}}, r
    assert p.reply(p.request("ping"))["result"] == {}
    assert p.reply(p.request("resources/list"))["error"]["code"] == -32601
    p.proc.stdin.write(b"not json\n")
    p.proc.stdin.flush()
    assert json.loads(p.line())["error"]["code"] == -32700
    assert p.close() == 0
    ok("initialize", "protocolVersion echoed or 2025-06-18; ping; -32601; -32700; exit 0 on EOF")


def check_normal(mode: str) -> None:
    p = Peer(mode, stderr=subprocess.PIPE if mode == "noise" else subprocess.DEVNULL)
    drained = [0]
    if mode == "noise":

        def drain() -> None:
            while chunk := p.proc.stderr.read1(65536):
                drained[0] += len(chunk)

        threading.Thread(target=drain, daemon=True).start()
    p.initialize()
    assert tool_names(p) == ["t", "ping_tool"]
    assert p.reply(call(p, "ping_tool"))["result"]["content"][0]["text"] == "pong"
    assert p.reply(call(p, "t"))["result"]["content"][0]["text"] == "t"
    assert p.reply(call(p, "nope"))["result"]["isError"] is True
    if mode == "noise":
        deadline = time.monotonic() + WAIT
        while drained[0] < 2 * 1024 * 1024 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert drained[0] >= 2 * 1024 * 1024, drained
        assert p.reply(call(p, "ping_tool"))["result"]["content"][0]["text"] == "pong"
    p.close()
    ok(mode, "ping_tool -> pong, t -> t, unknown -> isError" + (f"; {drained[0]} bytes of stderr junk" if mode == "noise" else ""))


def check_giant() -> None:
    p = Peer("giant")
    p.initialize()
    rid = call(p)
    line = p.line()
    assert len(line) > 50 * 1024 * 1024 and line.endswith(b"\n"), len(line)
    message = json.loads(line)
    assert message["id"] == rid and len(message["result"]["content"][0]["text"]) == 50 * 1024 * 1024
    p.close()
    ok("giant", f"one line of {len(line)} bytes")


def check_endless_progress() -> None:
    events = Path(tempfile.mkdtemp()) / "events.jsonl"
    p = Peer("endless_progress", env={"MCP_EVENTS_FILE": str(events)})
    p.initialize()
    rid = call(p, meta={"progressToken": "tok"})
    seen = []
    while len(seen) < 20:
        m = json.loads(p.line())
        assert m["method"] == "notifications/progress" and m["params"]["progressToken"] == "tok", m
        seen.append(m["params"]["progress"])
    assert seen == list(range(1, 21)), seen
    p.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "enough"}})
    deadline = time.monotonic() + WAIT
    while not events.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert json.loads(events.read_text()) == {"event": "cancelled", "request_id": rid}
    # After the cancellation, at most a notification already in flight, then nothing.
    time.sleep(0.3)
    while not p.lines.empty():
        p.lines.get()
    assert p.reply(p.request("ping"))["result"] == {}
    try:
        extra = p.line(timeout=0.5)
    except queue.Empty:
        extra = None
    assert extra is None, extra
    p.close()
    ok("endless_progress", "20 ticks, stops on notifications/cancelled, event recorded")


def check_never() -> None:
    p = Peer("never")
    p.initialize()
    call(p)
    assert p.reply(p.request("ping"))["result"] == {}
    try:
        extra = p.line(timeout=1)
    except queue.Empty:
        extra = None
    assert extra is None, extra
    p.close()
    ok("never", "tools/call unanswered, ping answered")


def check_malformed() -> None:
    p = Peer("malformed")
    p.initialize()
    rid = call(p)
    lines = [p.line() for _ in range(4)]
    assert lines[0] == b'{"this is": not json\n', lines[0]
    assert json.loads(lines[1])["id"] == 987654321
    assert lines[2] == bytes([0x00, 0x01, 0x02, 0xFF, 0xFE, 0xFD, 0x80, 0x81, 0x1B, 0x7F]) + b"\n"
    last = json.loads(lines[3])
    assert last["id"] == rid and last["result"]["content"][0]["text"] == "survived"
    p.close()
    ok("malformed", "garbage, stray id, binary, then the result")


def check_many_tools() -> None:
    p = Peer("many_tools")
    p.initialize()
    rid = p.request("tools/list")
    line = p.line()
    tools = json.loads(line)["result"]["tools"]
    assert len(tools) == 10_001 and tools[0]["name"] == "t" and tools[-1]["name"] == "tool_09999"
    p.close()
    ok("many_tools", f"{len(tools)} tools in {len(line)} bytes (id {rid})")


def check_deep_schema() -> None:
    p = Peer("deep_schema")
    p.initialize()
    rid = p.request("tools/list")
    line = p.line()
    assert line.startswith(b'{"jsonrpc":"2.0","id":%d,"result":{"tools":[{"name":"t"' % rid), line[:80]
    depth = line.count(b'"properties":{"a":')
    assert depth == 200_000, depth
    assert line.endswith(b'{"type":"object"}' + b"}}" * 200_000 + b"}]}}\n")
    p.close()
    ok("deep_schema", f"{len(line)} bytes, depth {depth} (not parsed here: too deep for json)")


def check_die() -> None:
    p = Peer("die")
    p.initialize()
    call(p)
    assert p.line() is None
    assert p.proc.wait(timeout=WAIT) == 1
    ok("die", "exit 1 on tools/call, nothing answered")


def check_restart_counter() -> None:
    starts = Path(tempfile.mkdtemp()) / "starts"
    env = {"MCP_STARTS_FILE": str(starts)}
    p = Peer("restart_counter", env=env)
    p.initialize()
    call(p)
    assert p.line() is None and p.proc.wait(timeout=WAIT) == 1
    assert starts.read_text().strip() == "1"
    for n in (2, 3):
        p = Peer("restart_counter", env=env)
        p.initialize()
        assert p.reply(call(p))["result"]["content"][0]["text"] == f"start {n}"
        assert p.reply(call(p))["result"]["content"][0]["text"] == f"start {n}"
        p.close()
    ok("restart_counter", "first process dies on its call; later ones answer start N")


def main() -> None:
    check_initialize()
    check_normal("normal")
    check_normal("noise")
    check_giant()
    check_endless_progress()
    check_never()
    check_malformed()
    check_many_tools()
    check_deep_schema()
    check_die()
    check_restart_counter()
    print("hostile_server: all checks passed")


if __name__ == "__main__":
    main()
