"""A demo catalog that changes with time: prices and stock move, products come and go.

Time is cut into change epochs of ``interval`` seconds from ``start``: the epoch at time *t*
is ``floor((t - start) / interval)`` (at most ``cycles`` when that is set). Epoch 0 is the
plain :class:`~distcrawl.demo.catalog.Catalog`. Epoch *k* derives from epoch *k - 1* with a
random generator seeded by ``(seed, k)`` alone, so the same seed and start give the same
shop in every process, whenever it is asked: at epoch *k*, a ``rate`` share of the live
products change price, availability or both; ``remove`` live products are removed (their
page answers 404 or 410, they leave every listing); ``add`` new products (ids past the
catalog's size) join a leaf. Every change is made at the epoch's start time,
``start + k * interval``, and :meth:`CatalogHistory.ground_truth` lists every one of them.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import random
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distcrawl.demo.catalog import Catalog, Leaf, Product

__all__ = ["HISTORY_FIELDS", "CatalogAt", "CatalogHistory", "ChangePlan"]

#: the product fields whose changes the ground truth lists (the pipeline's history fields)
HISTORY_FIELDS = ("price", "currency", "availability")
#: availabilities a stock change moves between
_AVAILABILITIES = ("InStock", "OutOfStock", "PreOrder")
#: a price change multiplies the price by a factor drawn from this range (never 1)
_PRICE_FACTOR = (0.75, 1.25)
#: of the products that change in an epoch: below the first share only the price changes,
#: below the second only the availability, above it both
_PRICE_ONLY, _STOCK_ONLY = 0.6, 0.85
#: cheapest and dearest prices, in cents (the catalog's own range)
_MIN_CENTS, _MAX_CENTS = 100, 99_999


@dataclass(frozen=True)
class ChangePlan:
    """How a demo shop changes (all off by default: a shop that never changes).

    ``interval``: seconds of one change epoch (0: never changes). ``rate``: share of the live
    products that change price and/or availability in each epoch. ``add`` / ``remove``:
    products added / removed in each epoch. ``cycles``: epochs after which the shop stops
    changing (0: never stops).
    """

    interval: float = 0.0
    rate: float = 0.0
    add: int = 0
    remove: int = 0
    cycles: int = 0

    def __post_init__(self) -> None:
        if not (self.interval >= 0 and math.isfinite(self.interval)):
            raise ValueError(f"change interval must be >= 0 seconds, got {self.interval}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"change rate must be within 0..1, got {self.rate}")
        for name in ("add", "remove", "cycles"):
            if getattr(self, name) < 0:
                raise ValueError(f"change {name} must be >= 0, got {getattr(self, name)}")
        if not self.interval and (self.rate or self.add or self.remove):
            raise ValueError("a change rate, additions or removals need a change interval > 0")

    @property
    def active(self) -> bool:
        return self.interval > 0


#: (epoch, price, currency, availability): one state of a product, from that epoch on
_State = tuple[int, str, str, str]


class CatalogHistory:
    """The catalog through its change epochs, computed on demand and kept (thread-safe).

    Epochs only move forward; :meth:`advance` computes every epoch up to the one asked for.
    Every look-up names the epoch it reads, so one answer reads one consistent moment even
    while another thread advances.
    """

    def __init__(self, catalog: Catalog, plan: ChangePlan, *, start: float) -> None:
        self.catalog = catalog
        self.plan = plan
        self.start = start
        self._lock = threading.Lock()
        self._computed = 0
        self._leaves = catalog.leaves()
        self._leaf_index = {(leaf.top_slug, leaf.slug): leaf for leaf in self._leaves}
        self._base: dict[int, Product] = {p.id: p for p in catalog.products()}
        self._timeline: dict[int, list[_State]] = {
            p.id: [(0, p.price, p.currency, p.availability)] for p in catalog.products()
        }
        self._added_at: dict[int, int] = dict.fromkeys(self._base, 0)
        self._removed_at: dict[int, int] = {}
        self._live: set[int] = set(self._base)
        self._next_id = len(catalog) + 1
        # leaf -> every id it ever held (ascending: ids only grow), and the epochs at which
        # its membership changed
        self._members: dict[tuple[str, str], list[int]] = {
            key: list(leaf.product_ids) for key, leaf in self._leaf_index.items()
        }
        self._member_events: dict[tuple[str, str], list[int]] = {
            key: [0] for key in self._leaf_index
        }
        self._catalog_events: list[int] = [0]  # epochs at which any product came or went
        self._live_counts: list[int] = [len(self._live)]  # epoch -> live products
        #: every field change: (epoch, product id, field, old, new)
        self._changes: list[tuple[int, int, str, str, str]] = []

    # -- time -------------------------------------------------------------------------------

    def epoch_at(self, now: float) -> int:
        """The change epoch at unix time *now* (0 before ``start`` or when nothing changes)."""
        if not self.plan.active or now <= self.start:
            return 0
        epoch = math.floor((now - self.start) / self.plan.interval)
        return min(epoch, self.plan.cycles) if self.plan.cycles else epoch

    def time_of(self, epoch: int) -> float:
        """When epoch *epoch* began: the time its changes were made."""
        return self.start + epoch * self.plan.interval

    def advance(self, epoch: int) -> None:
        """Compute every epoch up to *epoch*."""
        if epoch <= self._computed:
            return
        with self._lock:
            while self._computed < epoch:
                self._step(self._computed + 1)
                self._computed += 1

    # -- one moment -------------------------------------------------------------------------

    def product(self, product_id: int, epoch: int) -> Product | None:
        """Product *product_id* as it is at *epoch*; None if it is not live then."""
        if not self.live(product_id, epoch):
            return None
        base = self._base[product_id]
        state = self._state(product_id, epoch)
        if state[0] == 0:
            return base
        return dataclasses.replace(base, price=state[1], currency=state[2], availability=state[3])

    def last_published(self, product_id: int) -> Product | None:
        """A removed product as it was just before its removal (None: not removed)."""
        removed = self._removed_at.get(product_id)
        return None if removed is None else self.product(product_id, removed - 1)

    def known(self, product_id: int) -> Product | None:
        """Product *product_id* as first published (live or not), None if never published."""
        return self._base.get(product_id)

    def live(self, product_id: int, epoch: int) -> bool:
        added = self._added_at.get(product_id)
        if added is None or added > epoch:
            return False
        removed = self._removed_at.get(product_id)
        return removed is None or removed > epoch

    def removed(self, product_id: int, epoch: int) -> bool:
        """Whether the product was published and then removed by *epoch*."""
        removed = self._removed_at.get(product_id)
        return removed is not None and removed <= epoch

    def product_modified(self, product_id: int, epoch: int) -> int:
        """The epoch at which the product's page last changed, as of *epoch*."""
        return self._state(product_id, epoch)[0]

    def at(self, epoch: int) -> CatalogAt:
        return CatalogAt(self, epoch)

    def live_count(self, epoch: int) -> int:
        return self._live_counts[min(epoch, len(self._live_counts) - 1)]

    def catalog_modified(self, epoch: int) -> int:
        """The last epoch (up to *epoch*) at which a product came or went."""
        return _last_at_most(self._catalog_events, epoch)

    def leaf_modified(self, leaf: Leaf, epoch: int) -> int:
        """The last epoch (up to *epoch*) at which a product came into or left *leaf*."""
        return _last_at_most(self._member_events[(leaf.top_slug, leaf.slug)], epoch)

    def leaf_ids(self, leaf: Leaf, epoch: int) -> list[int]:
        """The ids *leaf* lists at *epoch*, ascending."""
        members = self._members[(leaf.top_slug, leaf.slug)]
        return [pid for pid in members if self.live(pid, epoch)]

    def products_ever(self) -> list[Product]:
        """Every product ever published (as first published), by id."""
        with self._lock:
            return [self._base[pid] for pid in sorted(self._base)]

    # -- the ground truth -------------------------------------------------------------------

    def ground_truth(self, epoch: int, base_url: str) -> dict[str, Any]:
        """Every change made up to *epoch*: per product its timeline (``at`` is the unix time
        a state began) and when it was added and removed; plus the flat lists ``changes``
        (one entry per field changed: ``url``, ``path``, ``sku``, ``field``, ``old``, ``new``,
        ``at``), ``added`` and ``removed``. Prices are strings with two decimals."""
        with self._lock:
            return self._ground_truth(epoch, base_url)

    def _ground_truth(self, epoch: int, base_url: str) -> dict[str, Any]:
        products: dict[str, Any] = {}
        added: list[dict[str, Any]] = []
        removed: list[dict[str, Any]] = []
        for pid in sorted(self._base):
            added_at = self._added_at[pid]
            if added_at > epoch:
                continue
            product = self._base[pid]
            gone = self._removed_at.get(pid)
            gone = gone if gone is not None and gone <= epoch else None
            entry = {
                "url": base_url + product.path,
                "sku": product.sku,
                "added_at": self.time_of(added_at),
                "removed_at": None if gone is None else self.time_of(gone),
                "timeline": [
                    {"at": self.time_of(e), "price": p, "currency": c, "availability": a}
                    for e, p, c, a in self._timeline[pid]
                    if e <= epoch
                ],
            }
            products[product.path] = entry
            ref = {"url": entry["url"], "path": product.path, "sku": product.sku}
            if added_at > 0:
                added.append({**ref, "at": entry["added_at"]})
            if gone is not None:
                removed.append({**ref, "at": entry["removed_at"]})
        changes = []
        for change_epoch, pid, name, old, new in self._changes:
            if change_epoch > epoch:
                break
            product = self._base[pid]
            changes.append(
                {
                    "url": base_url + product.path,
                    "path": product.path,
                    "sku": product.sku,
                    "field": name,
                    "old": old,
                    "new": new,
                    "at": self.time_of(change_epoch),
                }
            )
        return {
            "start": self.start,
            "interval": self.plan.interval,
            "rate": self.plan.rate,
            "add": self.plan.add,
            "remove": self.plan.remove,
            "cycles": self.plan.cycles,
            "epoch": epoch,
            "changes": changes,
            "added": added,
            "removed": removed,
            "products": products,
        }

    # -- computing an epoch -----------------------------------------------------------------

    def _state(self, product_id: int, epoch: int) -> _State:
        timeline = self._timeline[product_id]
        index = bisect.bisect_right(timeline, epoch, key=_epoch_of) - 1
        return timeline[max(0, index)]

    def _step(self, epoch: int) -> None:
        """Derive epoch *epoch* from the one before (called with the lock held, in order)."""
        rng = random.Random(f"distcrawl-demo-changes:{self.catalog.seed}:{epoch}")
        live = sorted(self._live)
        changing = rng.sample(live, min(len(live), round(self.plan.rate * len(live))))
        for pid in changing:
            _, price, currency, availability = self._timeline[pid][-1]
            roll = rng.random()
            new_price, new_availability = price, availability
            if roll < _PRICE_ONLY or roll >= _STOCK_ONLY:
                new_price = _new_price(price, rng)
            if roll >= _PRICE_ONLY:
                new_availability = rng.choice([a for a in _AVAILABILITIES if a != availability])
            self._timeline[pid].append((epoch, new_price, currency, new_availability))
            for name, old, new in (
                ("price", price, new_price),
                ("availability", availability, new_availability),
            ):
                if old != new:
                    self._changes.append((epoch, pid, name, old, new))
        unchanged = sorted(self._live - set(changing))
        gone = rng.sample(unchanged, min(len(unchanged), self.plan.remove))
        touched: set[tuple[str, str]] = set()
        for pid in gone:
            self._removed_at[pid] = epoch
            self._live.discard(pid)
            product = self._base[pid]
            touched.add((product.top_slug, product.leaf_slug))
        for _ in range(self.plan.add):
            leaf = self._leaves[rng.randrange(len(self._leaves))]
            product = self.catalog.make_product(self._next_id, leaf)
            self._next_id += 1
            self._base[product.id] = product
            self._timeline[product.id] = [
                (epoch, product.price, product.currency, product.availability)
            ]
            self._added_at[product.id] = epoch
            self._live.add(product.id)
            key = (leaf.top_slug, leaf.slug)
            self._members[key].append(product.id)
            touched.add(key)
        for key in touched:
            self._member_events[key].append(epoch)
        if touched:
            self._catalog_events.append(epoch)
        self._live_counts.append(len(self._live))


class CatalogAt:
    """The listings of a changing catalog at one epoch (what listing pages render from)."""

    def __init__(self, history: CatalogHistory, epoch: int) -> None:
        self.history = history
        self.epoch = epoch
        self.page_size = history.catalog.page_size

    def page_count(self, leaf: Leaf) -> int:
        return max(1, math.ceil(len(self.history.leaf_ids(leaf, self.epoch)) / self.page_size))

    def listing_page(self, leaf: Leaf, page: int) -> list[Product]:
        ids = self.history.leaf_ids(leaf, self.epoch)
        start = (page - 1) * self.page_size
        shown = ids[start : start + self.page_size]
        found = (self.history.product(pid, self.epoch) for pid in shown)
        return [product for product in found if product is not None]

    def page_modified(self, leaf: Leaf, page: int) -> int:
        """The last epoch at which this listing page may have changed: a product came into or
        left the leaf, or one it shows changed."""
        modified = self.history.leaf_modified(leaf, self.epoch)
        for product in self.listing_page(leaf, page):
            modified = max(modified, self.history.product_modified(product.id, self.epoch))
        return modified

    def tracked_link(self, product_id: int) -> bool:
        return self.history.catalog.tracked_link(product_id)


def _epoch_of(state: _State) -> int:
    return state[0]


def _last_at_most(epochs: list[int], epoch: int) -> int:
    index = bisect.bisect_right(epochs, epoch) - 1
    return epochs[max(0, index)]


def _new_price(price: str, rng: random.Random) -> str:
    """A different price near *price* (two decimals, within the catalog's range)."""
    whole, _, fraction = price.partition(".")
    cents = int(whole) * 100 + int(fraction or 0)
    new = round(cents * rng.uniform(*_PRICE_FACTOR))
    new = min(_MAX_CENTS, max(_MIN_CENTS, new))
    if new == cents:
        new = cents + 1 if cents < _MAX_CENTS else cents - 1
    return f"{new // 100}.{new % 100:02d}"
