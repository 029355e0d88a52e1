# /// script
# requires-python = ">=3.9"
# dependencies = []
# ///
"""Draw cards from the deck, seeded."""

import argparse
import random

DECK = ["ace", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def draw(seed, count):
    rng = random.Random(seed)
    order = list(DECK)
    for i in range(len(order) - 1, 0, -1):
        j = rng.randrange(i + 1)
        order[i], order[j] = order[j], order[i]
    return order[:count]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=1)
    a = p.parse_args()
    for card in draw(a.seed, a.count):
        print(card)


if __name__ == "__main__":
    main()
