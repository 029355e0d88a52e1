"""What an agent does with band over MCP, with the official MCP Python SDK, over stdio or HTTP.

Usage: agent.py stdio BAND_EXE SERVER_ARGS...
       agent.py http URL

Lists the tools; calls `text__count` (a result) and with a bad input (a tool error);
`probe__ticks` (its stderr lines come back as progress); `probe__sleepy`, cancelled once its
first `tick uid=N` progress arrived; then `skills/list` and `skills/get` of the Skills extension.
Once the call is cancelled it says `cancelled uid=N` on stderr and waits for a line on stdin,
the session still open. Prints one JSON report; tests/it/mcp_agents.rs compares it with the TypeScript client's
(tests/mcp/agent.mjs) and checks from outside that the cancelled run is gone.
"""

import asyncio
import json
import os
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp import types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import TypeAdapter

ANY = TypeAdapter(dict[str, Any])
# A request of a method the SDK has no type for, its params kept as given (a bare `types.Request`
# turns them into `RequestParams`, which drops `uri`).
Custom = types.Request[dict[str, Any], str]


async def session_run(session):
    report = {}
    await session.initialize()
    report["tools"] = sorted(t.name for t in (await session.list_tools()).tools)

    ok = await session.call_tool("text__count", {"text": "hello big world"})
    report["ok"] = {"is_error": bool(ok.is_error), "structured": ok.structured_content}

    bad = await session.call_tool("text__count", {"text": 5})
    report["bad"] = {
        "is_error": bool(bad.is_error),
        "headline": bad.content[0].text.split(":")[0],
    }

    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    ticks = await session.call_tool("probe__ticks", {"name": "x"}, progress_callback=on_progress)
    report["progress"] = {
        "is_error": bool(ticks.is_error),
        "messages": [m[m.index("step ") :] for m in progress if m and "step " in m],
    }
    # A failed call says why (absent when it succeeded, so the two clients' reports stay equal).
    if ticks.is_error:
        report["progress"]["error"] = ticks.content[0].text if ticks.content else None

    ticked = asyncio.Event()
    seen = {}

    async def on_tick(value, total, message):
        if message and "tick uid=" in message and "uid" not in seen:
            seen["uid"] = int(message.split("uid=")[1].split()[0])
            ticked.set()

    call = asyncio.create_task(session.call_tool("probe__sleepy", {"name": "x"}, progress_callback=on_tick))
    await asyncio.wait_for(ticked.wait(), 120)
    call.cancel()
    try:
        await call
        cancelled = False
    except asyncio.CancelledError:
        cancelled = True
    report["cancel"] = {"cancelled": cancelled, "uid": seen["uid"]}
    # The session stays open: the test sees the run gone (a cancel, not a disconnect), then
    # says go on.
    print(f"cancelled uid={seen['uid']}", file=sys.stderr, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    listed = await session.send_request(Custom(method="skills/list", params={}), ANY)
    report["skills_list"] = sorted(s["frontmatter"]["name"] for s in listed["skills"])
    got = await session.send_request(
        Custom(method="skills/get", params={"uri": "skill://text/SKILL.md"}), ANY
    )
    report["skills_get"] = {
        "name": got["skill"]["frontmatter"]["name"],
        "files": sorted(r["uri"] for r in got["skill"]["resources"]),
    }
    return report


async def main(argv):
    if argv[0] == "stdio":
        params = StdioServerParameters(command=argv[1], args=argv[2:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                report = await session_run(session)
    else:
        async with streamable_http_client(argv[1]) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                report = await session_run(session)
    print(json.dumps(report, sort_keys=True), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
