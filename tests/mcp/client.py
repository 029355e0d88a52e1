"""Drive `band mcp` with the official MCP Python SDK's stdio client and print what came back.

Usage: client.py BAND_EXE CALLS_JSON -- SERVER_ARGS...
CALLS_JSON is a list of [tool_name, arguments]. Prints one JSON document: the server's name and
instructions, the tools it listed, the resources it listed with what each read returned, and for
each call its result (or the exception the SDK raised) and the progress messages received. The
assertions are in tests/it/mcp.rs.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(band, calls, server_args):
    params = StdioServerParameters(command=band, args=server_args, env=dict(os.environ))
    report = {"calls": [], "resources": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            report["server"] = init.server_info.name
            report["instructions"] = init.instructions
            listed = await session.list_tools()
            report["tools"] = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]
            for r in (await session.list_resources()).resources:
                entry = r.model_dump(mode="json", by_alias=True, exclude_none=True)
                contents = (await session.read_resource(r.uri)).contents
                entry["text"] = "".join(getattr(c, "text", "") for c in contents)
                report["resources"].append(entry)
            for name, arguments in calls:
                progress = []

                async def on_progress(value, total, message, progress=progress):
                    progress.append(message)

                entry = {"name": name, "progress": progress}
                try:
                    # The SDK checks a result against the tool's outputSchema unless it is an error.
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
