"""Cancel or abandon a `band mcp` tool call with the official MCP Python SDK's stdio client.

Usage: cancel.py BAND_EXE MODE TOOL ARGUMENTS_JSON -- SERVER_ARGS...
       cancel.py - MODE TOOL ARGUMENTS_JSON -- --url URL   (a `band mcp --http` at URL)

The tool's script must say `tick uid=N` on stderr while it runs (each stderr line becomes a
progress message). Once it does:
- MODE `cancel`: the call is cancelled (the SDK sends `notifications/cancelled`); prints
  `cancelled uid=N` and keeps the session open for 20 s, so the server sees a cancel, not a
  disconnect;
- MODE `disconnect`: prints `disconnecting uid=N` and exits at once, which closes band mcp's
  stdin (over HTTP: the connection).
The assertions are in tests/it/cancel.rs.
"""

import asyncio
import contextlib
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


@contextlib.asynccontextmanager
async def connect(band, server_args):
    if server_args[:1] == ["--url"]:
        async with streamable_http_client(server_args[1]) as streams:
            yield streams[0], streams[1]
    else:
        params = StdioServerParameters(command=band, args=server_args, env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            yield read, write


async def main(band, mode, tool, arguments, server_args):
    async with connect(band, server_args) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            ticked = asyncio.Event()
            seen = {}

            async def on_progress(value, total, message):
                if message and "tick uid=" in message:
                    seen["uid"] = message.split("uid=")[1].split()[0]
                    ticked.set()

            call = asyncio.create_task(session.call_tool(tool, arguments, progress_callback=on_progress))
            await asyncio.wait_for(ticked.wait(), 60)
            if mode == "disconnect":
                print(f"disconnecting uid={seen['uid']}", flush=True)
                os._exit(0)
            call.cancel()
            try:
                await call
            except BaseException:  # the cancellation itself
                pass
            print(f"cancelled uid={seen['uid']}", flush=True)
            await asyncio.sleep(20)


if __name__ == "__main__":
    sep = sys.argv.index("--")
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[sep + 1 :]))
