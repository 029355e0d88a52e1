"""Drive `band mcp` with the official MCP Python SDK's stdio client and print what came back.

Usage: client.py BAND_EXE CALLS_JSON -- SERVER_ARGS...
CALLS_JSON is a list of [tool_name, arguments]. Prints one JSON document: the server's name,
the tools it listed, and for each call its result (or the exception the SDK raised) and the
progress messages received. The assertions are in tests/it/mcp.rs.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(band, calls, server_args):
    params = StdioServerParameters(command=band, args=server_args, env=dict(os.environ))
    report = {"calls": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            report["server"] = init.server_info.name
            listed = await session.list_tools()
            report["tools"] = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]
            for name, arguments in calls:
                progress = []

                async def on_progress(value, total, message, progress=progress):
                    progress.append(message)

                entry = {"name": name, "progress": progress}
                try:
                    r = await session.call_tool(name, arguments, progress_callback=on_progress)
                    entry["is_error"] = bool(r.is_error)
                    entry["structured"] = r.structured_content
                    entry["text"] = [c.text for c in r.content if getattr(c, "type", "") == "text"]
                except Exception as e:  # the SDK's own verdict (a protocol error) is part of the report
                    entry["exception"] = f"{type(e).__name__}: {e}"
                report["calls"].append(entry)
    print(json.dumps(report))


if __name__ == "__main__":
    sep = sys.argv.index("--")
    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]), sys.argv[sep + 1 :]))
