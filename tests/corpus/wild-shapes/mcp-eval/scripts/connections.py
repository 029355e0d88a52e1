"""Connections to an MCP server."""


def connect(transport, command, args):
    return f"{transport}: {command} {' '.join(args)}"


if __name__ == "__main__":
    print(connect("stdio", "python", ["server.py"]))
