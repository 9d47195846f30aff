"""The labelled sets the privacy detectors are judged on, as requests (pure, but for reading).

Outside sets (../shared/data/outside, written elsewhere: see each folder's README) are
sentences and documents with labelled spans; each row is wrapped in one of the request shapes
the proxy serves, chosen by a hash of its text, so every shape meets every kind of row. The
generated set (bench/privacy_generated.py: faker's locales, frozen before any tuning) is
requests already. Tune on the `tune` split; every figure reported is the `report` split's.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = ROOT.parent / "shared" / "data" / "outside"
GENERATED = ROOT / "bench" / "data"
OUTSIDE_SETS = ("presidio-synth", "meddocan", "uner", "klue-ner", "stockmark-ner-ja")
GENERATED_SETS = ("generated_pii",)
Split = Literal["tune", "report"]
_MODEL = "gpt-4o-mini"
_SET_LANGUAGE = {
    "presidio-synth": "en",
    "meddocan": "es",
    "klue-ner": "ko",
    "stockmark-ner-ja": "ja",
}
_UNER_LANGUAGE = {
    "English": "en",
    "German": "de",
    "Portuguese": "pt",
    "Chinese": "zh",
    "Danish": "da",
    "Swedish": "sv",
    "Croatian": "hr",
    "Slovak": "sk",
    "Russian": "ru",
}


@dataclass(frozen=True)
class Row:
    """One request of a set: whether it carries personal data, which kinds, in what."""

    set: str
    body: dict[str, Any]
    pii: bool
    classes: tuple[str, ...]  # span labels (outside sets) or classes (generated) it carries
    lang: str
    shape: str
    endpoint: str = "chat"  # chat, completions, embeddings or responses


def path_of(name: str, split: Split) -> Path:
    folder = GENERATED if name in GENERATED_SETS else OUTSIDE / name
    return folder / f"{name}.{split}.jsonl"


def available(name: str, split: Split) -> bool:
    return path_of(name, split).is_file()


def rows(name: str, split: Split, sample: int = 0, seed: int = 20261128) -> list[Row]:
    """The set's rows on `split`; `sample` > 0 draws that many at random (seeded)."""
    with path_of(name, split).open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    if 0 < sample < len(records):
        records = random.Random(seed).sample(records, sample)
    made = _generated if name in GENERATED_SETS else _wrapped
    return [made(name, record) for record in records]


def _generated(name: str, record: dict[str, Any]) -> Row:
    return Row(
        name,
        record["body"],
        bool(record["pii"]),
        tuple(record.get("classes", ())),
        record.get("lang", "?"),
        record.get("shape", record.get("endpoint", "?")),
        record.get("endpoint", "chat"),
    )


def _wrapped(name: str, record: dict[str, Any]) -> Row:
    text: str = record["text"]
    shape = SHAPE_NAMES[int(hashlib.sha256(text.encode()).hexdigest(), 16) % len(SHAPE_NAMES)]
    labels = tuple(dict.fromkeys(span["label"] for span in record["spans"] if span["pii"]))
    endpoint = _ENDPOINTS.get(shape, "chat")
    body = SHAPES[shape](text)
    return Row(name, body, bool(record["pii"]), labels, _language(name, record), shape, endpoint)


def _language(name: str, record: dict[str, Any]) -> str:
    if name != "uner":
        return _SET_LANGUAGE.get(name, "?")
    treebank = str(record["source"]).split("UNER_", 1)[1].split("-", 1)[0]
    return _UNER_LANGUAGE.get(treebank, treebank)


def _chat_user(text: str) -> dict[str, Any]:
    return {"model": _MODEL, "messages": [{"role": "user", "content": text}]}


def _chat_history(text: str) -> dict[str, Any]:
    return {
        "model": _MODEL,
        "messages": [
            {"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": f"Summarise this for me:\n\n{text}"},
            {"role": "assistant", "content": "Here is a short summary."},
            {"role": "user", "content": "Thanks. Now translate it into French."},
        ],
    }


def _completions(text: str) -> dict[str, Any]:
    return {"model": _MODEL, "prompt": f"Text: {text}\nKeywords:", "max_tokens": 32}


def _responses(text: str) -> dict[str, Any]:
    parts = [{"type": "input_text", "text": text}]
    return {"model": _MODEL, "input": [{"role": "user", "content": parts}]}


def _tool_result(text: str) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}
    return {
        "model": _MODEL,
        "messages": [
            {"role": "user", "content": "Fetch the record and tell me what it says."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"note": text})},
        ],
    }


def _json_record(text: str) -> dict[str, Any]:
    record = json.dumps({"id": 1, "text": text}, ensure_ascii=False)
    return _chat_user(f"Classify the record below.\n```json\n{record}\n```")


SHAPES: dict[str, Callable[[str], dict[str, Any]]] = {
    "chat_user": _chat_user,
    "chat_history": _chat_history,
    "completions_prompt": _completions,
    "responses_input": _responses,
    "tool_result": _tool_result,
    "json_record": _json_record,
}
SHAPE_NAMES = tuple(SHAPES)
_ENDPOINTS = {"completions_prompt": "completions", "responses_input": "responses"}


def every_set(split: Split) -> Iterator[str]:
    """The sets present on this machine (an outside folder may be absent)."""
    yield from (name for name in (*OUTSIDE_SETS, *GENERATED_SETS) if available(name, split))
