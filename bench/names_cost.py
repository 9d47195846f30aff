"""What the multilingual names tagger costs (proxy/legs/name_tagger.py: the encoder in numpy and
its head), as the proxy runs it: one thread, numpy's BLAS kept to one thread (proxy/serve.py).

    .venv/bin/python -m bench.names_cost [--chars 1000,4000] [--repeat 3]

Text: faker's paragraphs in six languages and scripts (never a set the head learnt from), cut to
each size. Per language and size: milliseconds, the encoder's pieces, pieces per second, and
how much longer the larger text took than the smaller (its size ratio when linear)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from bench.report import table
from proxy.legs.encoder import Encoder
from proxy.legs.name_tagger import NameTagger

LOCALES = ("en_US", "de_DE", "es_ES", "ru_RU", "ja_JP", "ko_KR")


def text_of(locale: str, chars: int) -> str:
    from faker import Faker

    fake = Faker(locale)
    fake.seed_instance(31)
    out = ""
    while len(out) < chars:
        out += fake.paragraph(nb_sentences=5) + "\n"
    return out[:chars]


def seconds(tagger: NameTagger, text: str, repeat: int) -> float:
    """The best of `repeat` readings (each of another text, so none is remembered)."""
    best = float("inf")
    for attempt in range(repeat):
        started = time.perf_counter()
        tagger.people(f"{attempt}{text[1:]}")
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", default="1000,4000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.chars.split(",")]
    encoder = Encoder()
    tagger = NameTagger(encoder=encoder)
    rows = []
    with threadpool_limits(1):
        for locale in LOCALES:
            times = []
            for size in sizes:
                text = text_of(locale, size)
                pieces = sum(len(read.spans) for read in encoder.read(text.splitlines()))
                took = seconds(tagger, text, args.repeat)
                times.append(took)
                rows.append([locale, size, pieces, f"{took * 1000:.0f}", f"{pieces / took:.0f}"])
            rows[-1].append(f"{times[-1] / times[0]:.2f} (size x{sizes[-1] / sizes[0]:.0f})")
    header = ["language", "characters", "pieces", "ms", "pieces/s", "larger / smaller"]
    print(table(header, [row + [""] * (len(header) - len(row)) for row in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
