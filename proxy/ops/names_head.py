"""How the names tagger's head learns (proxy/legs/name_tagger.py's Head): two layers over the
encoder's states, cross-entropy per piece, AdamW. torch (the `export` extra), seeded, one
thread: the same examples make the same head. The proxy reads the head in numpy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from proxy.legs.name_tagger import Head


@dataclass(frozen=True)
class Example:
    """A text as the encoder read it, each piece marked when a name overlaps it."""

    set: str
    held_apart: bool
    states: npt.NDArray[np.float16]  # (pieces, width)
    names: npt.NDArray[np.bool_]  # (pieces,)


@dataclass(frozen=True)
class Settings:
    hidden: int = 256
    epochs: int = 6
    batch: int = 1024
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    dropout: float = 0.1
    seed: int = 31


def trained(examples: Sequence[Example], settings: Settings) -> Head:
    import torch as _torch

    torch: Any = _torch  # untyped

    torch.manual_seed(settings.seed)
    torch.set_num_threads(1)
    x = torch.from_numpy(np.concatenate([one.states for one in examples]).astype(np.float32))
    y = torch.from_numpy(np.concatenate([one.names for one in examples]).astype(np.float32))
    mean, scale = x.mean(0), x.std(0) + 1e-4
    x = (x - mean) / scale
    hidden = torch.nn.Linear(x.shape[1], settings.hidden)
    out = torch.nn.Linear(settings.hidden, 1)
    layers = torch.nn.Sequential(
        hidden, torch.nn.GELU(approximate="tanh"), torch.nn.Dropout(settings.dropout), out
    )
    optimiser = torch.optim.AdamW(
        layers.parameters(), lr=settings.learning_rate, weight_decay=settings.weight_decay
    )
    order = torch.Generator().manual_seed(settings.seed)
    for _ in range(settings.epochs):
        for batch in torch.randperm(len(x), generator=order).split(settings.batch):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                layers(x[batch]).squeeze(-1), y[batch]
            )
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()

    def array(tensor: Any) -> Any:
        return tensor.detach().numpy().astype(np.float32)

    return Head(
        mean=array(mean),
        scale=array(scale),
        hidden=array(hidden.weight.T),
        hidden_bias=array(hidden.bias),
        out=array(out.weight.T),
        out_bias=array(out.bias),
    )


def save(head: Head, path: Path) -> None:
    arrays = {name: getattr(head, name) for name in Head.__dataclass_fields__}
    with path.open("wb") as stream:
        np.savez_compressed(stream, **arrays)
