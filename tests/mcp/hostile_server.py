"""A hostile MCP server over stdio, for the MCP client's tests: plain Python 3 (stdlib only).

    python3 tests/mcp/hostile_server.py MODE

It speaks JSON-RPC 2.0, one message per line (newline-delimited) on stdin/stdout, as MCP's
stdio transport does, and answers:

  initialize                 protocolVersion: the client's when it is 2025-03-26, 2025-06-18 or
                             2025-11-25, else 2025-06-18; capabilities {"tools": {"listChanged":
                             true}}; serverInfo {"name": "hostile-MODE", "version": "1.0.0"}.
  notifications/initialized  nothing (as every notification, but notifications/cancelled).
  ping                       {}.
  tools/list                 every mode lists the tool `t` (inputSchema {"type": "object",
                             "properties": {"x": {"type": "string"}}}) and its own, below.
  tools/call                 what the MODE says; in the modes that answer normally, the tool `t`
                             returns the text "t" and an unknown tool a result with isError true.
  any other request          JSON-RPC error -32601; a line that is not JSON: error -32700.

The server exits when stdin closes. MODE is one of:

  normal           tools `t` and `ping_tool` (returns the text "pong").
  noise            as normal, and writes 1 MiB of junk to stderr every second (one 512 KiB line
                   with no break, then short lines holding bytes that are not UTF-8), from a
                   thread of its own: when the client stops reading stderr, only that thread
                   blocks (on the full pipe); the protocol goes on.
  giant            every tools/call is answered with one text content of 50 MiB (50 * 2^20 bytes
                   of "x"), the whole message on one line.
  endless_progress every tools/call gets notifications/progress every 10 ms (progress 1, 2, 3...,
                   no total, message "tick N"), with the call's params._meta.progressToken (none
                   when the call has no token), and never a result. It stops for that call on
                   notifications/cancelled naming the call's id, and then appends
                   {"event": "cancelled", "request_id": <id>} to the file named by env
                   MCP_EVENTS_FILE (when set), so a test sees the server got the cancellation.
  never            never answers a tools/call (it still answers ping and everything else).
  malformed        answers each tools/call with, one per line: `{"this is": not json`, a valid
                   JSON-RPC response to the unknown id 987654321, 10 bytes of binary that are not
                   UTF-8 (0x00 0x01 0x02 0xff 0xfe 0xfd 0x80 0x81 0x1b 0x7f), then the real result:
                   the text "survived".
  many_tools       tools/list returns 10,000 tools more, `tool_00000` ... `tool_09999`, each with a
                   small schema (about 1.3 MB in all, in one page, no nextCursor).
  deep_schema      tools/list returns one tool more, `deep`, whose inputSchema nests
                   {"type": "object", "properties": {"a": ...}} 200,000 levels deep (about 7.4 MB).
  die              on tools/call, exits with status 1 at once, before answering.
  restart_counter  on start, reads the integer in the file named by env MCP_STARTS_FILE (0 when
                   missing), adds 1 and writes it back: the number of processes started so far.
                   While that count is 1 (the first process), its first tools/call makes it exit
                   with status 1 before answering; from the second process on, tools/call answers
                   normally, with the text "start N" (N: this process's count).
  chatty           before answering each tools/call (normally), sends 8 each of: notifications/
                   message (logging) with 1 MiB of data, notifications/progress with the call's
                   token and a 1 MiB message, an unknown notifications/chatty with 1 MiB of
                   params, notifications/tools/list_changed, and requests to the client
                   (sampling/createMessage, roots/list, elicitation/create) with 1 MiB params;
                   every big string holds the marker "chatty-marker".
  crash_loop       counts its starts as restart_counter does (env MCP_STARTS_FILE), answers the
                   handshake and tools/list, then exits with status 1 at once: a server that
                   dies just after each connection is up.
  orphan           on tools/call, forks a grandchild that keeps stdin and stdout open (it sleeps
                   120 s, in the same process group) and exits with status 1 before answering:
                   the pipes stay open after the server is gone.
  paging           every tools/list page holds 200 tools more (`p_<page>_<n>`, each with a
                   2 KiB description) and a nextCursor to the next page, forever; each
                   tools/list appends {"event": "tools/list", "cursor": <cursor>} to the file
                   named by env MCP_EVENTS_FILE.
  odd              lists the tools below, and tools/call answers by the tool's name: `unknown_block` content blocks of an unknown type ("video") then the
                   text "after"; `error_no_content` {"isError": true} alone; `no_content` {};
                   `not_a_list` content "text" (a string); `deep_structured` structuredContent
                   nested 100 levels deep; `many_blocks` 300,000 content blocks {"type": "x"};
                   `string_structured` structuredContent "just a string"; `wrong_id_type` the
                   result under the id as a string when it was a number, then the real one.
  storm            after notifications/initialized, sends notifications/tools/list_changed
                   every 2 ms for 3 s from a thread of its own (the protocol goes on), then
                   appends {"event": "storm_over", "lists": N} to the file named by env
                   MCP_EVENTS_FILE: N the tools/list requests it got during the storm.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

SUPPORTED_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
DEFAULT_VERSION = "2025-06-18"
MODES = (
    "normal",
    "noise",
    "giant",
    "endless_progress",
    "never",
    "malformed",
    "many_tools",
    "deep_schema",
    "die",
    "restart_counter",
    "chatty",
    "crash_loop",
    "orphan",
    "paging",
    "odd",
    "storm",
)
TOOL_T = {
    "name": "t",
    "description": "A small tool every mode lists.",
    "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}},
}

ODD_TOOLS = (
    "unknown_block",
    "error_no_content",
    "no_content",
    "not_a_list",
    "deep_structured",
    "many_blocks",
    "string_structured",
    "wrong_id_type",
)

_out_lock = threading.Lock()


def write_raw(data: bytes) -> None:
    """Writes bytes to stdout at once (a whole line or lines) and flushes."""
    with _out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def send(message: dict) -> None:
    write_raw(json.dumps(message, separators=(",", ":")).encode() + b"\n")


def result(request_id, value: dict) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def error(request_id, code: int, message: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def text_result(text: str, is_error: bool = False) -> dict:
    value = {"content": [{"type": "text", "text": text}]}
    if is_error:
        value["isError"] = True
    return value


def record_event(event: dict) -> None:
    path = os.environ.get("MCP_EVENTS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(event) + "\n")


class Server:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.start_count = 0
        # endless_progress: request id (as JSON text) -> event that stops its ticker
        self.tickers: dict[str, threading.Event] = {}
        self.lists = 0
        if mode in ("restart_counter", "crash_loop"):
            self.start_count = self.count_start()
        if mode == "noise":
            threading.Thread(target=self.noise, daemon=True).start()

    @staticmethod
    def count_start() -> int:
        path = os.environ.get("MCP_STARTS_FILE")
        if not path:
            print("hostile_server: restart_counter needs env MCP_STARTS_FILE", file=sys.stderr)
            sys.exit(2)
        try:
            with open(path, encoding="utf-8") as f:
                count = int(f.read().strip() or "0")
        except FileNotFoundError:
            count = 0
        count += 1
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"{count}\n")
        return count

    @staticmethod
    def noise() -> None:
        junk_line = b"E" * (512 * 1024) + b"\n"
        short = b"junk \xff\xfe not utf-8 \x00\x1b[31m" + b"n" * 70 + b"\n"
        lines = short * ((512 * 1024) // len(short) + 1)
        chunk = junk_line + lines[: 512 * 1024]
        while True:
            try:
                sys.stderr.buffer.write(chunk)
                sys.stderr.buffer.flush()
            except (BrokenPipeError, OSError):
                return
            time.sleep(1)

    def tools(self) -> list[dict]:
        tools = [TOOL_T]
        if self.mode in ("normal", "noise"):
            tools.append({"name": "ping_tool", "description": "Returns pong.", "inputSchema": {"type": "object"}})
        if self.mode == "odd":
            tools += [{"name": n, "inputSchema": {"type": "object"}} for n in ODD_TOOLS]
        if self.mode == "many_tools":
            tools += [
                {
                    "name": f"tool_{i:05d}",
                    "description": f"Tool number {i}.",
                    "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
                }
                for i in range(10_000)
            ]
        return tools

    def send_page(self, request_id, params: dict) -> None:
        cursor = params.get("cursor")
        record_event({"event": "tools/list", "cursor": cursor})
        page = int(cursor) if isinstance(cursor, str) and cursor.isdigit() else 0
        tools = [TOOL_T] if page == 0 else []
        tools += [
            {"name": f"p_{page}_{i}", "description": "d" * 2048, "inputSchema": {"type": "object"}}
            for i in range(200)
        ]
        result(request_id, {"tools": tools, "nextCursor": str(page + 1)})

    def chatter(self, token) -> None:
        big = "chatty-marker " + "c" * (1024 * 1024)
        for i in range(8):
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "error", "logger": big, "data": big}})
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": i, "message": big}})
            send({"jsonrpc": "2.0", "method": "notifications/chatty", "params": {"junk": big}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": f"s{i}a", "method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1, "junk": big}})
            send({"jsonrpc": "2.0", "id": f"s{i}b", "method": "roots/list", "params": {"junk": big}})
            send({"jsonrpc": "2.0", "id": f"s{i}c", "method": "elicitation/create", "params": {"message": big, "requestedSchema": {"type": "object"}}})

    def send_tools_list(self, request_id, params: dict | None = None) -> None:
        if self.mode == "paging":
            self.send_page(request_id, params or {})
            return
        if self.mode != "deep_schema":
            result(request_id, {"tools": self.tools()})
            return
        # Built as text: json.dumps would recurse 200,000 levels deep.
        depth = 200_000
        schema = '{"type":"object","properties":{"a":' * depth + '{"type":"object"}' + "}}" * depth
        head = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"tools": self.tools()}}, separators=(",", ":"))
        # head ends with ']}}': the tools array, the result, the message
        assert head.endswith("]}}")
        deep = '{"name":"deep","description":"A schema 200,000 levels deep.","inputSchema":' + schema + "}"
        write_raw((head[:-3] + "," + deep + "]}}\n").encode())

    def call_tool(self, request_id, params: dict) -> None:
        mode = self.mode
        name = params.get("name")
        if mode == "giant":
            result(request_id, text_result("x" * (50 * 1024 * 1024)))
        elif mode == "endless_progress":
            token = (params.get("_meta") or {}).get("progressToken")
            stop = threading.Event()
            self.tickers[json.dumps(request_id)] = stop
            threading.Thread(target=self.tick, args=(request_id, token, stop), daemon=True).start()
        elif mode == "never":
            pass
        elif mode == "malformed":
            write_raw(b'{"this is": not json\n')
            send({"jsonrpc": "2.0", "id": 987654321, "result": {"content": [{"type": "text", "text": "stray"}]}})
            write_raw(bytes([0x00, 0x01, 0x02, 0xFF, 0xFE, 0xFD, 0x80, 0x81, 0x1B, 0x7F]) + b"\n")
            result(request_id, text_result("survived"))
        elif mode == "die":
            os._exit(1)
        elif mode == "orphan":
            if os.fork() == 0:
                time.sleep(120)
                os._exit(0)
            os._exit(1)
        elif mode == "odd":
            self.odd(request_id, name)
        elif mode == "chatty":
            self.chatter((params.get("_meta") or {}).get("progressToken"))
            result(request_id, text_result("t"))
        elif mode == "restart_counter":
            if self.start_count == 1:
                os._exit(1)
            result(request_id, text_result(f"start {self.start_count}"))
        elif name == "t":
            result(request_id, text_result("t"))
        elif name == "ping_tool" and mode in ("normal", "noise"):
            result(request_id, text_result("pong"))
        else:
            result(request_id, text_result(f"unknown tool: {name}", is_error=True))

    def storm(self) -> None:
        start_lists = self.lists
        end = time.monotonic() + 3
        while time.monotonic() < end:
            try:
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            except (BrokenPipeError, OSError):
                return
            time.sleep(0.002)
        record_event({"event": "storm_over", "lists": self.lists - start_lists})

    @staticmethod
    def odd(request_id, name) -> None:
        if name == "unknown_block":
            result(request_id, {"content": [{"type": "video", "url": "x"}, {"type": "text", "text": "after"}]})
        elif name == "error_no_content":
            result(request_id, {"isError": True})
        elif name == "no_content":
            result(request_id, {})
        elif name == "not_a_list":
            result(request_id, {"content": "text"})
        elif name == "deep_structured":
            deep = '{"a":' * 100 + "1" + "}" * 100
            head = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": []}}, separators=(",", ":"))
            write_raw((head[:-2] + ',"structuredContent":' + deep + "}}\n").encode())
        elif name == "many_blocks":
            result(request_id, {"content": [{"type": "x"}] * 300_000})
        elif name == "string_structured":
            result(request_id, {"content": [], "structuredContent": "just a string"})
        elif name == "wrong_id_type":
            result(str(request_id), text_result("wrong"))
            result(request_id, text_result("right"))
        elif name == "t":
            result(request_id, text_result("t"))
        else:
            result(request_id, text_result(f"unknown tool: {name}", is_error=True))

    @staticmethod
    def tick(request_id, token, stop: threading.Event) -> None:
        n = 0
        while not stop.wait(0.01):
            n += 1
            if token is None:
                continue
            try:
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": n, "message": f"tick {n}"},
                    }
                )
            except (BrokenPipeError, OSError):
                return

    def handle(self, message) -> None:
        if not isinstance(message, dict):
            error(None, -32600, "invalid request")
            return
        method = message.get("method")
        params = message.get("params") or {}
        if "id" not in message:  # a notification
            if method == "notifications/initialized" and self.mode == "storm":
                threading.Thread(target=self.storm, daemon=True).start()
            if method == "notifications/cancelled":
                key = json.dumps(params.get("requestId"))
                stop = self.tickers.pop(key, None)
                if stop is not None:
                    stop.set()
                    record_event({"event": "cancelled", "request_id": params.get("requestId")})
            return
        request_id = message["id"]
        if method == "initialize":
            asked = params.get("protocolVersion")
            result(
                request_id,
                {
                    "protocolVersion": asked if asked in SUPPORTED_VERSIONS else DEFAULT_VERSION,
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": f"hostile-{self.mode}", "version": "1.0.0"},
                },
            )
        elif method == "ping":
            result(request_id, {})
        elif method == "tools/list":
            self.lists += 1
            self.send_tools_list(request_id, params)
            if self.mode == "crash_loop":
                os._exit(1)
        elif method == "tools/call":
            self.call_tool(request_id, params)
        elif "method" in message:
            error(request_id, -32601, f"method not found: {str(method)[:100]}")
        # a response (to a request this server never makes) is ignored

    def run(self) -> None:
        for line in sys.stdin.buffer:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                error(None, -32700, "parse error")
                continue
            self.handle(message)


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1] not in MODES:
        print(f"usage: hostile_server.py MODE  (MODE: {', '.join(MODES)})", file=sys.stderr)
        sys.exit(2)
    try:
        Server(sys.argv[1]).run()
    except BrokenPipeError:
        pass


if __name__ == "__main__":
    main()
