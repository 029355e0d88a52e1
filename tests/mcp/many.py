"""One of several clients calling `band mcp --http` concurrently, with the official MCP Python SDK.

Usage: many.py URL CLIENT CLIENTS CALLS

Sends CALLS calls of `meet__meet` at once in one session: call K of client C is named `C-K`, and
its run waits for the markers of two peers, `C-(K xor 1)` (the same client) and
`(C+1 mod CLIENTS)-K` (the next client), so it ends only if its peers ran while it ran: a server
that ran one client's calls one after another, or one client after another, never ends them.
Prints one JSON list: for each call, its name, whether it was an error, and its structured output.
The assertions are in tests/it/mcp_agents.rs.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url, client, clients, calls):
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()

            async def call(k):
                name = f"{client}-{k}"
                peers = f"{client}-{k ^ 1} {(client + 1) % clients}-{k}"
                r = await session.call_tool("meet__meet", {"name": f"{name} {peers}"})
                text = [c.text for c in r.content if getattr(c, "type", "") == "text"]
                return {"name": name, "is_error": bool(r.is_error), "structured": r.structured_content, "text": text[:1]}

            results = await asyncio.gather(*(call(k) for k in range(calls)))
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
