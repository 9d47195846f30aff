"""How the names tagger learns (proxy/legs/name_tagger.py): its head (two layers over the
encoder's states) and low-rank adapters on the encoder's upper layers, trained together on each
piece's mark (in a name or not). Tuning the layers the head reads, not only the head, let
through a quarter fewer names on the tune rows held apart (UNER 8.3% to 5.9%, Stockmark 6.7%
to 5.0%, at the same 3% of clean rows flagged on average).

torch (the `export` extra), seeded; the layers below `tuned_from` are run once, in numpy, by
the caller. The proxy runs the result in numpy: the head as it is, the adapters added to the
encoder's weights once (proxy/legs/encoder.py: adapted)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from proxy.legs.e5_file import Floats
from proxy.legs.encoder import ADAPTED, READ_LAYERS, Encoder
from proxy.legs.name_tagger import Head

_SCALE = 2.0  # an adapter's change is a @ z * _SCALE (z starts at zero: the encoder as it was)


@dataclass(frozen=True)
class Example:
    """A text as the encoder's lower layers read it, each piece marked when a name overlaps it."""

    set: str
    held_apart: bool
    inputs: npt.NDArray[np.float16]  # (pieces + 2, hidden): <s> and </s> included
    names: npt.NDArray[np.bool_]  # (pieces,)


@dataclass(frozen=True)
class Settings:
    tuned_from: int = 5  # the first layer tuned (counted from 1): 5 to 8 of the 8 run
    rank: int = 16
    hidden: int = 256
    epochs: int = 3
    batch_pieces: int = 1024  # a batch's length times its texts, at most
    adapter_rate: float = 5e-4
    head_rate: float = 1e-3
    warmup_steps: int = 50
    weight_decay: float = 1e-4
    dropout: float = 0.1
    seed: int = 31
    threads: int = 2


@dataclass(frozen=True)
class Learnt:
    head: Head
    adapters: dict[str, Floats]  # "<layer>.<matrix>.a" (in, rank) and ".z" (rank, out)


def learnt(examples: Sequence[Example], encoder: Encoder, settings: Settings) -> Learnt:
    import torch

    assert min(READ_LAYERS) >= settings.tuned_from, "the head reads only tuned layers"
    torch.manual_seed(settings.seed)
    torch.set_num_threads(settings.threads)
    model = _Model(encoder, settings)
    model.standardise(examples)
    groups = [
        {"params": model.adapter_parameters(), "lr": settings.adapter_rate},
        {"params": model.head_parameters(), "lr": settings.head_rate},
    ]
    optimiser = torch.optim.AdamW(groups, weight_decay=settings.weight_decay)
    order = torch.Generator().manual_seed(settings.seed)
    steps = settings.epochs * len(_batches(examples, settings.batch_pieces))

    def rate(step: int) -> float:
        return min(1.0, (step + 1) / settings.warmup_steps) * max(0.05, 1 - step / steps)

    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, rate)
    for _ in range(settings.epochs):
        for batch in _batches(examples, settings.batch_pieces, order):
            logits, weights, marks = model.logits([examples[i] for i in batch], training=True)
            loss = (
                torch.nn.functional.binary_cross_entropy_with_logits(
                    logits, marks, weight=weights, reduction="sum"
                )
                / weights.sum()
            )
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
    return model.exported()


class _Model:
    """Layers tuned_from..8 with their adapters, and the head; torch tensors throughout."""

    def __init__(self, encoder: Encoder, settings: Settings) -> None:
        import torch

        self.torch: Any = torch
        self.settings = settings
        self.shape = encoder.shape
        self.layers = encoder.layers
        self.a: dict[str, Any] = {}
        self.z: dict[str, Any] = {}
        for number in self._tuned():
            for name in ADAPTED:
                rows, cols = getattr(self.layers[number - 1], name).shape
                key = f"{number}.{name}"
                self.a[key] = torch.nn.Parameter(torch.randn(rows, settings.rank) / rows**0.5)
                self.z[key] = torch.nn.Parameter(torch.zeros(settings.rank, cols))
        width = len(READ_LAYERS) * self.shape.hidden
        self.hidden = torch.nn.Linear(width, settings.hidden)
        self.out = torch.nn.Linear(settings.hidden, 1)
        self.dropout = torch.nn.Dropout(settings.dropout)
        self.mean = torch.zeros(width)
        self.scale = torch.ones(width)

    def _tuned(self) -> range:
        return range(self.settings.tuned_from, len(self.layers) + 1)

    def adapter_parameters(self) -> list[Any]:
        return [*self.a.values(), *self.z.values()]

    def head_parameters(self) -> list[Any]:
        return [*self.hidden.parameters(), *self.out.parameters()]

    def standardise(self, examples: Sequence[Example], most: int = 2000) -> None:
        """The head reads states less their mean, over their spread, as the untuned layers
        give them (on up to `most` texts drawn evenly)."""
        sample = examples[:: max(1, len(examples) // most)]
        with self.torch.no_grad():
            parts = []
            for batch in _batches(sample, self.settings.batch_pieces):
                states, weights, _ = self.states([sample[i] for i in batch])
                parts.append(states[weights > 0])
            flat = self.torch.cat(parts)
        self.mean, self.scale = flat.mean(0), flat.std(0) + 1e-4

    def logits(self, batch: Sequence[Example], training: bool) -> tuple[Any, Any, Any]:
        """Per text, per piece (<s> and </s> too, weighted 0): the logit of a name."""
        states, weights, marks = self.states(batch)
        standard = (states - self.mean) / self.scale
        h = self.torch.nn.functional.gelu(self.hidden(standard), approximate="tanh")
        h = self.dropout(h) if training else h
        return self.out(h).squeeze(-1), weights, marks

    def states(self, batch: Sequence[Example]) -> tuple[Any, Any, Any]:
        """Per text, per piece: the states the head reads, whether it counts (<s>, </s> and
        pads do not), and whether it is in a name."""
        torch = self.torch
        length = max(len(one.inputs) for one in batch)
        x = torch.zeros(len(batch), length, self.shape.hidden)
        mask = torch.full((len(batch), 1, 1, length), -1e9)
        weights = torch.zeros(len(batch), length)
        marks = torch.zeros(len(batch), length)
        for row, one in enumerate(batch):
            size = len(one.inputs)
            x[row, :size] = torch.from_numpy(one.inputs.astype(np.float32))
            mask[row, ..., :size] = 0
            weights[row, 1 : size - 1] = 1
            marks[row, 1 : size - 1] = torch.from_numpy(one.names.astype(np.float32))
        kept = {}
        for number in self._tuned():
            x = self._layer(x, mask, number)
            kept[number] = x
        states = torch.cat([kept[number] for number in READ_LAYERS], dim=-1)
        return states, weights, marks

    def _matrix(self, x: Any, number: int, name: str) -> Any:
        layer = self.layers[number - 1]
        weight = self.torch.from_numpy(getattr(layer, name))
        bias = self.torch.from_numpy(getattr(layer, f"{name}_bias"))
        key = f"{number}.{name}"
        return x @ weight + bias + (x @ self.a[key]) @ self.z[key] * _SCALE

    def _layer(self, x: Any, mask: Any, number: int) -> Any:
        functional = self.torch.nn.functional
        layer, shape = self.layers[number - 1], self.shape
        texts, length, hidden = x.shape
        size = hidden // shape.heads
        q, k, v = (
            part.view(texts, length, shape.heads, size).transpose(1, 2)
            for part in self._matrix(x, number, "qkv").split(hidden, dim=-1)
        )
        weights = (q @ k.transpose(-1, -2) / math.sqrt(size) + mask).softmax(-1)
        context = (weights @ v).transpose(1, 2).reshape(texts, length, hidden)
        norm1 = [self.torch.from_numpy(part) for part in layer.norm1]
        x = functional.layer_norm(
            x + self._matrix(context, number, "out"), (hidden,), *norm1, shape.eps
        )
        up = functional.gelu(self._matrix(x, number, "up"), approximate="tanh")
        norm2 = [self.torch.from_numpy(part) for part in layer.norm2]
        return functional.layer_norm(
            x + self._matrix(up, number, "down"), (hidden,), *norm2, shape.eps
        )

    def exported(self) -> Learnt:
        def array(tensor: Any) -> Floats:
            return np.ascontiguousarray(tensor.detach().numpy().astype(np.float32))

        adapters = {}
        for key in self.a:
            adapters[f"{key}.a"] = array(self.a[key])
            adapters[f"{key}.z"] = array(self.z[key] * _SCALE)
        head = Head(
            mean=array(self.mean),
            scale=array(self.scale),
            hidden=array(self.hidden.weight.T),
            hidden_bias=array(self.hidden.bias),
            out=array(self.out.weight.T),
            out_bias=array(self.out.bias),
        )
        return Learnt(head, adapters)


def _batches(examples: Sequence[Example], pieces: int, order: Any = None) -> list[list[int]]:
    """Texts of like length together (fewer pads), each batch within `pieces`; the batches in
    a random order when `order` (a torch generator) is given."""
    ranked = sorted(range(len(examples)), key=lambda i: len(examples[i].inputs))
    batches: list[list[int]] = []
    for index in ranked:
        widest = len(examples[index].inputs)
        if batches and widest * (len(batches[-1]) + 1) <= pieces:
            batches[-1].append(index)
        else:
            batches.append([index])
    if order is None:
        return batches
    import torch

    return [batches[i] for i in torch.randperm(len(batches), generator=order).tolist()]


def peaks(learnt: Learnt, examples: Sequence[Example], encoder: Encoder) -> Iterator[float]:
    """Each text's highest chance of a name, as the proxy will read it: in numpy, the adapters
    added to the encoder."""
    adapted = encoder.adapt(learnt.adapters)
    first = min(int(key.split(".")[0]) for key in learnt.adapters)
    for at in range(0, len(examples), 32):
        chunk = examples[at : at + 32]
        for states in adapted.upper([one.inputs for one in chunk], first):
            yield float(learnt.head.probabilities(states).max(initial=0.0))


def save(learnt: Learnt, head_path: Path, adapters_path: Path) -> None:
    arrays = {name: getattr(learnt.head, name) for name in Head.__dataclass_fields__}
    with head_path.open("wb") as stream:
        np.savez_compressed(stream, **arrays)
    adapters: dict[str, Any] = dict(learnt.adapters)
    with adapters_path.open("wb") as stream:
        np.savez_compressed(stream, **adapters)
