"""What leaves for the cloud, through real processes: the proxy, a local engine that is down, and
a cloud simulator that records every request it receives. Personal data written the way people
and programs really write it (invisible characters, other scripts' digits, a full stop after a
number) never reaches the cloud, and the official SDK is told not to retry the refusal; the
clean near-misses overflow as any request does; who the user is stays behind; an image is not
read as text, and the policy's media level decides whether it may leave."""

from __future__ import annotations

import base64
import contextlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from tests.policy_texts import EVERY_DETECTOR_RESTRICTED
from tests.processes import Process, backend_toml, cloud_toml, engine_flags, proxy, sim

CLOUD = engine_flags(personality="cloud", decode_base_ms=1, output_tokens=4)
# Model "m" goes to the cloud target "mini" when no local engine can take it.
TO_THE_CLOUD = """
[server]
probe_interval_s = 0.2

[[routes]]
model = "m"
cloud = ["mini"]
"""
POLICY = (
    TO_THE_CLOUD
    + """
[privacy]
levels = [{ name = "public" }, { name = "restricted", cloud = "none" }]
{media}
"""
    + EVERY_DETECTOR_RESTRICTED
    # the names model's detectors too (the ner extra: Presidio on a spaCy model)
    + 'person = "restricted"\nmedical = "restricted"\n'
)


@dataclass
class Leaving:
    proxy: Process
    cloud: Process

    def received(self) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = httpx.get(self.cloud.url + "/_sim/requests").json()["requests"]
        return got


@contextlib.contextmanager
def leaving(media: str = "") -> Iterator[Leaving]:
    """Model "m": a local backend that cannot be reached (a closed port), then the cloud."""
    with sim(*CLOUD) as cloud:
        down = backend_toml("gone", "vllm", "http://127.0.0.1:9", {"m": "m"})
        text = down + cloud_toml("mini", cloud.url) + POLICY.replace("{media}", media)
        with proxy(text) as p:
            yield Leaving(p, cloud)


@pytest.fixture(scope="module")
def stack() -> Iterator[Leaving]:
    with leaving() as built:
        yield built


def sdk(url: str, sent: list[httpx.Request]) -> openai.OpenAI:
    """The official client, as an application configures it (retries on), counting what it
    sends."""
    client = httpx.Client(event_hooks={"request": [sent.append]})
    return openai.OpenAI(base_url=url + "/v1", api_key="sk-local", http_client=client)


DISGUISED = [
    "write to jane\u200b.doe@exemplo.com about it",  # a zero-width space inside
    "my number is +44 20 7946 0958.",  # a full stop right after it
    "card \uff14\uff15\uff13\uff19 \uff11\uff14\uff18\uff18 0343 6467",  # fullwidth digits
    "card 4539\u20131488\u20130343\u20136467",  # en dashes
    "card 4539.1488.0343.6467",  # dots
    "my SSN is 123 45 6789",  # spaces
    "my SSN is 123456789",  # no separators, said to be one
    "ssn \u0661\u0662\u0663-\u0664\u0665-\u0666\u0667\u0668\u0669",  # Arabic-Indic digits
    "why is aws_access_key_id = AKIAQ3EGRTXN7VYKPL5D refused?",  # a cloud access key
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    "connect with postgres://app:Zq7rT2v9@db.internal:5432/orders",
    "my NI number is AB 12 34 56 C",  # a national ID
    "Aadhaar 2345\u00a06789\u00a00124",  # another, with no-break spaces
    "passport no. K4829175, expiring 2031",
    "Patient Maria Gonzalez, born on 12 May 1999, please file it",  # a birth date, a name
    "Please send the contract to Bartholomew Okonkwo before Friday.",  # a person's name
    "Our new hire Gwendolyn Ashworth starts on Monday; draft a welcome note.",
    "My son was diagnosed with epilepsy in March; what should his school know?",  # health
    "Ship the spare part to 17 Larch Avenue, Dayton OH 45402",  # a street address
    "Adresse: Kastanienallee 23, 10435 Berlin",
]


@pytest.mark.parametrize("text", DISGUISED)
def test_disguised_personal_data_never_reaches_the_cloud_and_the_sdk_does_not_retry(
    stack: Leaving, text: str
) -> None:
    before = len(stack.received())
    sent: list[httpx.Request] = []
    with pytest.raises(openai.InternalServerError) as refused:
        sdk(stack.proxy.url, sent).chat.completions.create(
            model="m", messages=[{"role": "user", "content": text}]
        )
    assert refused.value.status_code == 503
    assert refused.value.response.headers["x-overspill-privacy"] == "restricted"
    assert len(sent) == 1  # x-should-retry: false, where the SDK would retry a 503 twice
    assert len(stack.received()) == before


NEAR_MISSES = [
    "Upgrade to version 2.10.0.4 before Friday",
    "order 123456789 shipped yesterday",
    "ISBN 978-3-16-148410-0, second edition",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "meet on 2024-05-01 at 12:30",
    # (a first name alone counts now: in a record, "Nombre: Jose" is the patient; issue 31)
    "Hi team, can you rephrase this so it sounds friendlier?",
    "What is the usual dose of ibuprofen for adults?",  # medicine, about nobody
    "Is Oxford Street busy on Saturdays?",  # a street, no address
    "Date of birth: 12 May 1999. How old is that today?",  # a birth date alone names nobody
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_clean_near_misses_overflow_as_any_request_does(stack: Leaving, text: str) -> None:
    before = len(stack.received())
    answer = sdk(stack.proxy.url, []).chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": text}]
    )
    assert answer.headers["x-overspill-route"] == "cloud/mini"
    assert len(stack.received()) == before + 1
    assert stack.received()[-1]["body"]["messages"][0]["content"] == text


def test_who_the_user_is_stays_behind(stack: Leaving) -> None:
    answer = sdk(stack.proxy.url, []).chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "hello"}], user="u-4242"
    )
    assert answer.headers["x-overspill-route"] == "cloud/mini"
    body = stack.received()[-1]["body"]
    assert "user" not in body
    assert "u-4242" not in str(body)


def image(seed: int) -> dict[str, Any]:
    data = base64.b64encode(random.Random(seed).randbytes(100_000)).decode()
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}


def ask_with_image(url: str, seed: int) -> httpx.Response:
    content = [{"type": "text", "text": "what is in this picture?"}, image(seed)]
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=60)


def test_an_image_is_not_read_as_text(stack: Leaving) -> None:
    """Random base64 reads as IBANs and cards; with no media rule, an image may leave."""
    for seed in range(3):
        answered = ask_with_image(stack.proxy.url, seed)
        assert answered.status_code == 200
        assert answered.headers["x-overspill-route"] == "cloud/mini"
        assert answered.headers["x-overspill-privacy"] == "public"


def test_the_media_level_keeps_images_local() -> None:
    with leaving(media='media = "restricted"') as kept:
        refused = ask_with_image(kept.proxy.url, 7)
        assert refused.status_code == 503
        assert refused.headers["x-overspill-privacy"] == "restricted"
        assert "media at messages[0].content[1].image_url.url" in refused.text
        assert kept.received() == []


ECHO_CLOUD = engine_flags(personality="cloud", decode_base_ms=1, output_distribution="echo")
REDACTING = (
    TO_THE_CLOUD
    + """
[privacy]
levels = [{ name = "public" }, { name = "personal", redact = true }]
[privacy.detectors]
email = "personal"
phone = "personal"
payment_card = "personal"
person = "personal"
"""
)
PERSONAL = (
    "Please send the contract to Bartholomew Okonkwo at jane.doe@exemplo.com or call"
    " +44 20 7946 0958 about card 4539 1488 0343 6467."
)


@pytest.fixture(scope="module")
def redacting() -> Iterator[Leaving]:
    """The local engine is down; the cloud answers by repeating the last message it got."""
    with sim(*ECHO_CLOUD) as cloud:
        down = backend_toml("gone", "vllm", "http://127.0.0.1:9", {"m": "m"})
        with proxy(down + cloud_toml("mini", cloud.url) + REDACTING) as p:
            yield Leaving(p, cloud)


def test_redacted_personal_data_overflows_as_placeholders_and_comes_back_whole(
    redacting: Leaving,
) -> None:
    answer = sdk(redacting.proxy.url, []).chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": PERSONAL}]
    )
    assert answer.headers["x-overspill-route"] == "cloud/mini"
    assert answer.parse().choices[0].message.content == PERSONAL
    left = redacting.received()[-1]["body"]["messages"][0]["content"]
    assert left == (
        "Please send the contract to <PERSON_1> at <EMAIL_1> or call <PHONE_1> about card"
        " <PAYMENT_CARD_1>."
    )


def test_a_redacted_stream_is_restored_though_placeholders_arrive_in_pieces(
    redacting: Leaving,
) -> None:
    """The echo streams a placeholder as several tokens ("<", "EMAIL", "_", "1", ">")."""
    stream = sdk(redacting.proxy.url, []).chat.completions.create(
        model="m", messages=[{"role": "user", "content": PERSONAL}], stream=True
    )
    pieces = [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
    assert "".join(pieces) == PERSONAL
    assert len([piece for piece in pieces if piece]) > 5  # it did stream, piece by piece
    left = redacting.received()[-1]["body"]["messages"][0]["content"]
    assert "jane.doe" not in left
    assert "4111" not in left
    assert "Okonkwo" not in left


def test_text_past_what_the_names_model_reads_stays_local_single_words_included(
    stack: Leaving,
) -> None:
    """Medical terms are looked for in every text, one long word included: 117,000
    characters of doses are past the 100,000 the entity detectors read, and count as found
    (never read on the event loop, as they were, in seconds)."""
    before = len(stack.received())
    doses = ",".join(f"{i}mg" for i in range(16_000))
    body = {"model": "m", "messages": [{"role": "user", "content": doses}]}
    refused = httpx.post(stack.proxy.url + "/v1/chat/completions", json=body, timeout=60)
    assert refused.status_code == 503
    assert refused.headers["x-overspill-privacy"] == "restricted"
    assert "medical: text beyond the names model's limit" in refused.text
    assert len(stack.received()) == before


def test_what_the_names_model_did_not_read_never_leaves_with_its_names(
    redacting: Leaving,
) -> None:
    """Past the names model's limit its names are not known, so none could be redacted: the
    request may not leave at a level that sends it only redacted."""
    before = len(redacting.received())
    long = PERSONAL + " And some more words to read." * 4000  # ~120,000 characters
    body = {"model": "m", "messages": [{"role": "user", "content": long}]}
    refused = httpx.post(redacting.proxy.url + "/v1/chat/completions", json=body, timeout=60)
    assert refused.status_code == 503
    assert "leaves only redacted: person: text beyond the names model's limit" in refused.text
    assert len(redacting.received()) == before


def test_a_request_past_what_the_names_tagger_reads_stays_local_at_once(
    redacting: Leaving,
) -> None:
    """60 KB of prose: more pieces than the multilingual tagger reads within the scan timeout
    (proxy/legs/ner.py: NAMES_LIMIT_PIECES), so its names are not known and it may not leave
    redacted; it is refused for that, not for running out of time."""
    before = len(redacting.received())
    long = " ".join([PERSONAL] + ["The rest of the letter says nothing of anyone."] * 1200)
    body = {"model": "m", "messages": [{"role": "user", "content": long}]}
    refused = httpx.post(redacting.proxy.url + "/v1/chat/completions", json=body, timeout=60)
    assert refused.status_code == 503
    assert "person: text beyond the names tagger's limit (8,000 pieces)" in refused.text
    assert len(redacting.received()) == before


def test_a_long_request_leaves_redacted_and_comes_back_whole(redacting: Leaving) -> None:
    """3 KB: normalised and redacted off the event loop, read by the names models whole."""
    long = " ".join([PERSONAL] + ["The rest of the letter says nothing of anyone."] * 60)
    answer = sdk(redacting.proxy.url, []).chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": long}]
    )
    assert answer.headers["x-overspill-route"] == "cloud/mini"
    assert answer.parse().choices[0].message.content == long
    left = redacting.received()[-1]["body"]["messages"][0]["content"]
    assert left.startswith("Please send the contract to <PERSON_1> at <EMAIL_1> or call")
    assert "Okonkwo" not in left
