"""The answer cache's counters: what its lookups found and why, and what left it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CacheStats:
    stored: int = 0  # answers kept (one replacing an older answer to its question too)
    hits_exact: int = 0
    hits_semantic: int = 0
    misses: int = 0
    refused: int = 0  # similar enough (or nearly), but the guard found a critical difference
    refereed: int = 0  # borderline similarities the reference model settled
    overturned: int = 0  # ... on the other side of the threshold than the fast model put them
    unrefereed: int = 0  # ... that it could not settle (still loading, failed): not served
    verified: int = 0  # similar candidates the verifier read beside the question
    disagreed: int = 0  # ... whose answer it found does not answer it: never served
    corrected: int = 0  # ... it agreed on, read again with their typos corrected
    unverified: int = 0  # ... that it could not read (still loading, failed): not served
    speculated: int = 0  # lookups whose engine work started while the verifier read
    withdrawn: int = 0  # ... served a stored answer: the verifier agreed first
    overtaken: int = 0  # ... whose reading was dropped: the engine's answer began first (misses)
    evicted: int = 0
    expired: int = 0
    too_large: int = 0  # answers heavier than the whole cache's byte bound: not kept
