from draw_cards import draw


def test_draw_is_seeded():
    assert draw(1, 3) == draw(1, 3)


if __name__ == "__main__":
    test_draw_is_seeded()
