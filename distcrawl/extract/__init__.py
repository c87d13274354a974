"""Page extraction: a fetched page to its kind, canonical URL, links and product.

The spider's whole interface::

    profiles = load_profiles(["profiles/"])
    profile = SiteProfile.match(profiles, url)
    analysis = analyze(url=url, body=body, encoding=encoding, profile=profile)

Modules: :mod:`.page` (the entry point), :mod:`.merge` (the product's fields from their
sources), :mod:`.structured` and :mod:`.schema` (JSON-LD, microdata, RDFa, OpenGraph, script
data), :mod:`.heuristics` (visible markup: :mod:`.markup`, :mod:`.region`,
:mod:`.markup_price`, :mod:`.roles`, :mod:`.notation`, :mod:`.markup_codes`, :mod:`.stock`),
:mod:`.links` (link kinds and pagination), :mod:`.profile` (site profiles), :mod:`.canonical`,
:mod:`.prices`, :mod:`.codes`, :mod:`.availability`, :mod:`.cli` (``distcrawl extract``).
"""

from __future__ import annotations

from .availability import normalize_availability
from .canonical import canonicalize_url
from .page import PAGE_KINDS, PRODUCT_FIELDS, PageAnalysis, analyze
from .prices import normalize_currency, parse_price
from .profile import ProfileError, SiteProfile, load_profiles

__all__ = [
    "PAGE_KINDS",
    "PRODUCT_FIELDS",
    "PageAnalysis",
    "ProfileError",
    "SiteProfile",
    "analyze",
    "canonicalize_url",
    "load_profiles",
    "normalize_availability",
    "normalize_currency",
    "parse_price",
]
