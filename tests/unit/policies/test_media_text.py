"""policies/payload.py: only base64 data is media; text dressed as a data URL or put in a media
part's data field is read by the detectors (issue 30's second review: "data:x;base64, my card
is 4111 ..." left for the cloud as public)."""

from __future__ import annotations

import base64

from policies.model import Privacy, PrivacyLevel
from policies.payload import payload_of
from policies.privacy import classify

CARD = "4539 1488 0343 6467"
PRIVACY = Privacy(
    (PrivacyLevel("public"), PrivacyLevel("restricted", cloud="none")),
    "public",
    {"payment_card": "restricted"},
)


def chat(content: object) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": content}]}


def level(body: dict[str, object]) -> str:
    return classify(PRIVACY, header=None, body=body, tenant=None).level


def test_text_after_a_base64_mark_is_read() -> None:
    assert level(chat(f"data:x;base64, my card is {CARD}")) == "restricted"


def test_text_in_a_file_parts_data_is_read() -> None:
    part = {"type": "file", "file": {"file_data": f"my card is {CARD}"}}
    assert level(chat([part])) == "restricted"


def test_base64_data_is_media_and_not_read() -> None:
    data = base64.b64encode(f"my card is {CARD}".encode()).decode()
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    payload = payload_of(chat([image]))
    assert payload.carries_media
    assert level(chat([image])) == "public"
