"""The order a stream of several choices sends their tokens in (pure)."""

from __future__ import annotations

from proxy.sim.engine import Sequence
from proxy.sim.responder import in_step_order
from proxy.sim.tokens import OutputPlan


def generated(count: int) -> Sequence:
    seq = Sequence([" p"], OutputPlan((" w",) * 10, "length"), arrival=0.0)
    seq.generated = count
    return seq


def order(counts: list[int], sent: list[int]) -> list[int]:
    seqs = tuple(generated(count) for count in counts)
    out = []
    for index in in_step_order(seqs, sent):
        out.append(index)
        sent[index] += 1
    return out


def test_one_token_each_goes_out_in_index_order() -> None:
    assert order([1, 1, 1], [0, 0, 0]) == [0, 1, 2]


def test_several_steps_at_once_come_out_round_by_round() -> None:
    assert order([3, 3], [0, 0]) == [0, 1, 0, 1, 0, 1]


def test_what_was_sent_is_skipped_and_a_finished_choice_drops_out() -> None:
    sent = [1, 0, 2]
    assert order([2, 3, 2], sent) == [0, 1, 1, 1]
    assert sent == [2, 3, 2]


def test_nothing_new_yields_nothing() -> None:
    assert order([2, 0], [2, 0]) == []
