"""The demo shop's catalog: categories and products derived deterministically from a seed.

Everything here is pure data: the same ``(products, seed, page_size)`` always gives the same
categories, the same products with the same attributes, and the same listing pages. The HTTP
server renders it; tests and benchmarks use it as ground truth.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "AVAILABILITY_TEXT",
    "CURRENCY_SYMBOL",
    "Catalog",
    "Leaf",
    "Listings",
    "Product",
    "TopCategory",
]

#: products in a catalog unless told otherwise
DEFAULT_PRODUCTS = 300
#: product cards on one listing page
DEFAULT_PAGE_SIZE = 20
#: seed of the catalog and of the fault RNG
DEFAULT_SEED = 0

#: about this many products share one leaf category (before clamping below)
_PRODUCTS_PER_LEAF = 75
#: leaf categories never fewer (so small catalogs still have a real tree) ...
_MIN_LEAVES = 6
#: ... nor more (so huge catalogs get long paginations, not thousands of categories)
_MAX_LEAVES = 64

#: top-level category name -> the leaf names it may use (at least 8 each: 8 x 8 = _MAX_LEAVES)
_TREE: dict[str, tuple[str, ...]] = {
    top: tuple(leaves.split("|"))
    for top, leaves in (
        ("Home & Garden", "Lamps|Rugs|Planters|Cushions|Clocks|Mirrors|Vases|Hoses"),
        ("Electronics", "Headphones|Chargers|Cables|Speakers|Keyboards|Mice|Webcams|Routers"),
        ("Outdoor", "Tents|Backpacks|Lanterns|Hammocks|Coolers|Compasses|Stoves|Tarps"),
        ("Kitchen", "Knives|Pans|Kettles|Mugs|Grinders|Scales|Bowls|Whisks"),
        ("Toys", "Puzzles|Kites|Blocks|Robots|Dolls|Yo-yos|Marbles|Trains"),
        ("Office", "Pens|Notebooks|Staplers|Folders|Desks|Chairs|Desk Lights|Tapes"),
        ("Sports", "Balls|Rackets|Gloves|Helmets|Bottles|Mats|Ropes|Whistles"),
        ("Books", "Novels|Atlases|Cookbooks|Comics|Poetry|Biographies|Guides|Essays"),
    )
}


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_COLOURS = _words(
    "Blue Red Green Black White Silver Amber Teal Olive Coral Ivory Slate Crimson Indigo Golden"
    " Smoky"
)
_NOUNS = _words(
    "Widget Gadget Gizmo Sprocket Doohickey Contraption Thingamajig Device Module Kit Set Bundle"
    " Tool Unit Piece Organizer"
)
_BRANDS = _words(
    "Acme Globex Initech Umbrella Hooli Vandelay Stark Wonka Tyrell Cyberdyne Soylent Gringotts"
)
_QUALITIES = _words("sturdy lightweight compact elegant rugged versatile handy durable")

#: ISO 4217 code -> the symbol the shop prints before a price
CURRENCY_SYMBOL: dict[str, str] = {"USD": "$", "EUR": "€", "GBP": "£"}
#: schema.org ItemAvailability name -> the stock text a shopper sees
AVAILABILITY_TEXT: dict[str, str] = {
    "InStock": "In stock",
    "OutOfStock": "Sold out",
    "PreOrder": "Available for pre-order",
}


def slugify(text: str) -> str:
    """Lower-case ASCII words joined by hyphens: ``"Home & Garden"`` -> ``"home-garden"``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def ean13(first12: str) -> str:
    """The 13-digit GTIN for 12 digits: append the EAN-13 check digit."""
    total = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(first12))
    return first12 + str((10 - total % 10) % 10)


@dataclass(frozen=True, slots=True)
class Product:
    """One product; every attribute follows from ``(seed, id)`` alone."""

    id: int
    name: str
    slug: str
    sku: str
    gtin13: str
    brand: str
    description: str
    price: str  # two decimals with a dot, e.g. "12.99" (never a float)
    currency: str  # ISO 4217
    availability: str  # schema.org ItemAvailability name: InStock, OutOfStock, PreOrder
    images: int  # number of gallery images, 1..3
    top_slug: str
    leaf_slug: str

    @property
    def path(self) -> str:
        """The canonical path of the product page."""
        return f"/p/{self.id}-{self.slug}.html"

    def image_paths(self) -> list[str]:
        return [f"/img/{self.id}-{n}.jpg" for n in range(1, self.images + 1)]


@dataclass(frozen=True, slots=True)
class Leaf:
    """A leaf category: one paginated listing of products, ids in ascending order."""

    slug: str
    name: str
    top_slug: str
    top_name: str
    product_ids: tuple[int, ...]

    @property
    def path(self) -> str:
        return f"/c/{self.top_slug}/{self.slug}/"


@dataclass(frozen=True, slots=True)
class TopCategory:
    """A top-level category: an index page of leaf categories, no products of its own."""

    slug: str
    name: str
    leaves: tuple[Leaf, ...]

    @property
    def path(self) -> str:
        return f"/c/{self.slug}/"


class Listings(Protocol):
    """What a listing page is rendered from: the catalog, or the catalog at one moment of a
    shop that changes (:class:`distcrawl.demo.changes.CatalogAt`)."""

    def page_count(self, leaf: Leaf) -> int: ...

    def listing_page(self, leaf: Leaf, page: int) -> list[Product]: ...

    def tracked_link(self, product_id: int) -> bool: ...


class Catalog:
    """The whole shop as data: category tree, products and listing pages."""

    def __init__(
        self,
        products: int = DEFAULT_PRODUCTS,
        *,
        seed: int = DEFAULT_SEED,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> None:
        if products < 0:
            raise ValueError(f"products must be >= 0, got {products}")
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        self.size = products
        self.seed = seed
        self.page_size = page_size
        # A string seed hashes the same in every process (str seeds use SHA-512, not hash()).
        rng = random.Random(f"distcrawl-demo-tree:{seed}")

        n_leaves = min(_MAX_LEAVES, max(_MIN_LEAVES, math.ceil(products / _PRODUCTS_PER_LEAF)))
        n_tops = min(len(_TREE), max(3, n_leaves // 3))
        top_names = rng.sample(sorted(_TREE), n_tops)
        leaf_names: list[tuple[str, str]] = []  # (top name, leaf name)
        for i, top_name in enumerate(top_names):
            count = n_leaves // n_tops + (1 if i < n_leaves % n_tops else 0)
            leaf_names.extend((top_name, leaf) for leaf in rng.sample(_TREE[top_name], count))

        # Deal shuffled ids round-robin: leaf sizes differ by at most one.
        ids = list(range(1, products + 1))
        rng.shuffle(ids)
        per_leaf: list[list[int]] = [[] for _ in leaf_names]
        for i, product_id in enumerate(ids):
            per_leaf[i % len(leaf_names)].append(product_id)

        leaf_of: dict[int, tuple[str, str]] = {}
        leaves: dict[tuple[str, str], Leaf] = {}
        tops: list[TopCategory] = []
        for top_name in top_names:
            top_leaves: list[Leaf] = []
            for (owner, leaf_name), members in zip(leaf_names, per_leaf, strict=True):
                if owner != top_name:
                    continue
                leaf = Leaf(
                    slug=slugify(leaf_name),
                    name=leaf_name,
                    top_slug=slugify(top_name),
                    top_name=top_name,
                    product_ids=tuple(sorted(members)),
                )
                top_leaves.append(leaf)
                leaves[(leaf.top_slug, leaf.slug)] = leaf
                for product_id in members:
                    leaf_of[product_id] = (leaf.top_slug, leaf.slug)
            tops.append(TopCategory(slugify(top_name), top_name, tuple(top_leaves)))

        self.tops: tuple[TopCategory, ...] = tuple(tops)
        self._tops_by_slug = {top.slug: top for top in tops}
        self._leaves = leaves
        self._products: list[Product] = [
            self._make_product(product_id, *leaf_of[product_id])
            for product_id in range(1, products + 1)
        ]
        fail_rng = random.Random(f"distcrawl-demo-fail:{seed}")
        # Failing products are a prefix of one fixed order, so raising fail_products only
        # adds products to the failing set and lowering it heals the most recent ones.
        self._fail_order = list(range(1, products + 1))
        fail_rng.shuffle(self._fail_order)

    def make_product(self, product_id: int, leaf: Leaf) -> Product:
        """Product *product_id* as it would be in *leaf*: its attributes follow from
        ``(seed, id)`` alone, so a product added later to a changing shop (an id past the
        catalog's size) looks like any other."""
        return self._make_product(product_id, leaf.top_slug, leaf.slug)

    def _make_product(self, product_id: int, top_slug: str, leaf_slug: str) -> Product:
        # One hash per product: attributes do not depend on the catalog's size or order.
        digest = hashlib.blake2b(
            f"{self.seed}:{product_id}".encode(), digest_size=16, person=b"distcrawl-demo"
        ).digest()
        h = int.from_bytes(digest, "big")
        h, colour = divmod(h, len(_COLOURS))
        h, noun = divmod(h, len(_NOUNS))
        h, brand = divmod(h, len(_BRANDS))
        h, quality = divmod(h, len(_QUALITIES))
        h, cents = divmod(h, 99_900)
        h, currency_roll = divmod(h, 10)
        h, stock_roll = divmod(h, 100)
        h, images = divmod(h, 3)
        name = f"{_COLOURS[colour]} {_NOUNS[noun]} {product_id}"
        brand_name = _BRANDS[brand]
        cents += 100  # 1.00 .. 999.99
        currency = "USD" if currency_roll < 7 else ("EUR" if currency_roll < 9 else "GBP")
        availability = (
            "InStock" if stock_roll < 80 else ("OutOfStock" if stock_roll < 92 else "PreOrder")
        )
        return Product(
            id=product_id,
            name=name,
            slug=slugify(name),
            sku=f"DC-{product_id:06d}",
            gtin13=ean13(f"40{self.seed % 100:02d}{product_id % 10**8:08d}"),
            brand=brand_name,
            description=(
                f"The {name} is {_article(_QUALITIES[quality])} {_QUALITIES[quality]} "
                f"{_NOUNS[noun].lower()} by {brand_name}. "
                f"Item {product_id} of the distcrawl demo catalog."
            ),
            price=f"{cents // 100}.{cents % 100:02d}",
            currency=currency,
            availability=availability,
            images=images + 1,
            top_slug=top_slug,
            leaf_slug=leaf_slug,
        )

    # -- look-ups -------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.size

    def products(self) -> list[Product]:
        """Every product, by ascending id."""
        return list(self._products)

    def product(self, product_id: int) -> Product | None:
        if 1 <= product_id <= self.size:
            return self._products[product_id - 1]
        return None

    def top(self, slug: str) -> TopCategory | None:
        return self._tops_by_slug.get(slug)

    def leaf(self, top_slug: str, leaf_slug: str) -> Leaf | None:
        return self._leaves.get((top_slug, leaf_slug))

    def leaves(self) -> list[Leaf]:
        return [leaf for top in self.tops for leaf in top.leaves]

    def page_count(self, leaf: Leaf) -> int:
        """Listing pages of a leaf; an empty leaf still has its (empty) first page."""
        return max(1, math.ceil(len(leaf.product_ids) / self.page_size))

    def listing_page(self, leaf: Leaf, page: int) -> list[Product]:
        """The products on page ``page`` (1-based) of a leaf's listing."""
        start = (page - 1) * self.page_size
        return [self._products[i - 1] for i in leaf.product_ids[start : start + self.page_size]]

    def failing_ids(self, count: int) -> frozenset[int]:
        """The ``count`` products that always answer 500 (deterministic from the seed)."""
        return frozenset(self._fail_order[: max(0, count)])

    def tracked_link(self, product_id: int) -> bool:
        """Whether listings link this product with tracking parameters (about a third)."""
        return (product_id * 7 + self.seed) % 3 == 0
