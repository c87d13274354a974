"""A child's ``fp h`` fields (``fingerprint_args``) on generated fingerprints: the bucket a node
sends is the one ``bucket_hash`` names (the script checks its buckets against ``bucket_hash``:
tests/frontier/test_store_batches.py)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from distcrawl.frontier.batch import bucket_hash, fingerprint_args, fingerprint_bytes


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(st.binary(min_size=16, max_size=16), st.binary(min_size=20, max_size=20)),
    st.integers(0, 20),
    st.integers(0, 2**20),
)
@example(b"\x00" * 16, 0, 0)
@example(b"\xff" * 16, 3, 5)
@example(b"\x80" + b"\x00" * 15, 31, 1)
@example(b"\x01\x02\x04\x08" + b"\x10" * 12, 4, 16)
def test_the_bucket_sent_is_the_one_bucket_hash_names(raw: bytes, level: int, split: int) -> None:
    split %= 2**level
    member = int.from_bytes(raw[:8], "big", signed=True)
    h = bucket_hash(member)
    want = h % 2**level
    if want < split:
        want = h % 2 ** (level + 1)
    assert fingerprint_args(raw, bloom=False, buckets=(level, split)) == (str(member), want)
    assert fingerprint_args(raw, bloom=False) == (str(member), h)
    assert fingerprint_args(raw.hex(), bloom=False) == (str(member), h)
    assert fingerprint_args(b"", bloom=False) == ("", "")
    assert fingerprint_args(raw, bloom=True) == (fingerprint_bytes(raw), "")
