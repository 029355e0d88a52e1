"""Run the questions of an evaluation file against an MCP server."""

import argparse

from connections import connect


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-t", "--transport", default="stdio")
    p.add_argument("-c", "--command")
    p.add_argument("-a", "--args", action="append", default=[])
    p.add_argument("questions")
    a = p.parse_args()
    print(connect(a.transport, a.command, a.args), a.questions)


if __name__ == "__main__":
    main()
