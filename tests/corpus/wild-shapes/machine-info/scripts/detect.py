"""Report the machine's resources as JSON."""

import json

from probe import gpus, memory


def main():
    print(json.dumps({"memory": memory(), "gpus": gpus()}))


if __name__ == "__main__":
    main()
