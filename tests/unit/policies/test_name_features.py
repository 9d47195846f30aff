"""What the multilingual names tagger reads of a text: tokens in any script, and features."""

from __future__ import annotations

from policies.name_features import Gazetteer, features, shape, tokens

NAMES = Gazetteer(
    given=frozenset({"Ernesto", "冬彦", "Олег"}),
    family=frozenset({"Rivera", "岡部", "김"}),
    places=frozenset({"Madrid"}),
    companies=frozenset({"Siemens"}),
)


def words(text: str) -> list[str]:
    return [text[start:end] for start, end in tokens(text)]


def test_a_latin_name_is_read_a_word_at_a_time_with_its_inner_marks() -> None:
    assert words("Nombre: Jean-Luc O'Neill, 42.") == [
        "Nombre",
        ":",
        "Jean-Luc",
        "O'Neill",
        ",",
        "42",
        ".",
    ]


def test_unspaced_scripts_are_read_a_character_at_a_time() -> None:
    assert words("漫画家・岡部冬彦が") == ["漫", "画", "家", "・", "岡", "部", "冬", "彦", "が"]
    assert words("김원준 씨가") == ["김", "원", "준", "씨", "가"]


def test_a_word_mixing_scripts_keeps_the_spaced_part_whole() -> None:
    assert words("iPhone用") == ["iPhone", "用"]


def test_offsets_point_into_the_text() -> None:
    text = "Олег  Петров\tпишет"
    assert [text[a:b] for a, b in tokens(text)] == ["Олег", "Петров", "пишет"]


def test_shape_shows_each_run_of_a_kind_once() -> None:
    assert shape("Rivera") == "Xx"
    assert shape("MRZ2024") == "Xd"
    assert shape("岡部") == "C"


def test_known_names_places_and_companies_are_marked() -> None:
    text = "Ernesto Rivera works at Siemens in Madrid"
    marked = features(text, tokens(text), NAMES)
    assert "g" in marked[0]
    assert "f" in marked[1]
    assert "so" in marked[4]
    assert "sp" in marked[6]
    assert "-1g" in marked[1]  # the word before is a given name


def test_a_run_of_characters_spelling_a_name_is_marked_where_it_sits() -> None:
    text = "岡部冬彦が"
    marked = features(text, tokens(text), NAMES)
    assert "kfB" in marked[0]
    assert "kfI" in marked[1]
    assert "kgB" in marked[2]
    assert "kgI" in marked[3]
    assert not any(mark.startswith("k") for mark in marked[4])


def test_a_one_character_surname_is_marked() -> None:
    text = "김원준"
    assert "kf1" in features(text, tokens(text), NAMES)[0]
