"""Items in a queued request's meta and cb_kwargs: a ``scrapy.Item``, a dataclass and an attrs
object travel as their fields and come back as their class, if that class is allowed."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import attr
import pytest
import scrapy

from distcrawl.node.requests import classes, codec
from distcrawl.node.requests.payload import BadEntry


class Product(scrapy.Item):
    name = scrapy.Field()
    price = scrapy.Field()
    tags = scrapy.Field()


@dataclasses.dataclass
class Offer:
    sku: str
    prices: list[float] = dataclasses.field(default_factory=list)


@attr.s(auto_attribs=True)
class Stock:
    count: int
    where: dict[str, Any] = attr.Factory(dict)


@dataclasses.dataclass
class Unlisted:
    sku: str


@dataclasses.dataclass
class Derived:
    sku: str
    key: str = dataclasses.field(init=False, default="")


class Spider(scrapy.Spider):
    name = "items"

    def parse_product(self, response: Any, product: Product, offer: Offer) -> None:
        pass  # pragma: no cover - never called


@pytest.fixture(autouse=True, scope="module")
def _allowed() -> None:
    classes.allow_item_classes([f"{__name__}.Product", Offer, f"{__name__}.Stock"])


def test_items_in_meta_and_cb_kwargs_come_back_as_their_class() -> None:
    spider = Spider()
    product = Product(name="Toy", tags=["a", "b"])  # partly filled: price not set yet
    request = scrapy.Request(
        "http://shop.test/p/1.html",
        callback=spider.parse_product,
        meta={"item": product, "stock": Stock(3, {"a": 1}), "plain": {"x": 1}, "depth": 2},
        cb_kwargs={"product": product, "offer": Offer("S1", [1.5, 2.0])},
    )
    payload = codec.encode(request, spider)
    back = codec.decode(payload, spider)
    assert type(back.meta["item"]) is Product and dict(back.meta["item"]) == dict(product)
    assert "price" not in back.meta["item"]
    assert type(back.meta["stock"]) is Stock and back.meta["stock"] == Stock(3, {"a": 1})
    assert back.meta["plain"] == {"x": 1} and back.meta["depth"] == 2
    assert type(back.cb_kwargs["product"]) is Product
    assert back.cb_kwargs["offer"] == Offer("S1", [1.5, 2.0])
    assert back.callback == spider.parse_product
    # nothing but the fields and the class names goes to Redis
    data = json.loads(payload)
    assert data["it"] == {
        "mt": {"item": f"{__name__}.Product", "stock": f"{__name__}.Stock"},
        "kw": {"product": f"{__name__}.Product", "offer": f"{__name__}.Offer"},
    }
    assert data["mt"]["item"] == {"name": "Toy", "tags": ["a", "b"]}
    # and a node rebuilds it again from its own payload (a retry, a dead letter re-queued)
    assert codec.encode(back, spider) == payload


def test_an_item_class_not_allowed_is_refused_naming_the_setting() -> None:
    request = scrapy.Request("http://shop.test/", meta={"item": Unlisted("x")})
    with pytest.raises(ValueError, match="DISTCRAWL_ITEM_CLASSES"):
        codec.encode(request)
    # a dead letter is still written, without it
    assert "it" not in json.loads(codec.encode(request, strict=False))


def test_an_item_whose_fields_json_cannot_carry_is_refused_naming_the_key() -> None:
    nested = Product(name="x", price=Offer("inner"))
    with pytest.raises(ValueError, match="meta key 'item' holds a Product whose field 'price'"):
        codec.encode(scrapy.Request("http://shop.test/", meta={"item": nested}))


def test_a_class_that_cannot_be_rebuilt_from_its_fields_is_not_allowed() -> None:
    with pytest.raises(ValueError, match="cannot be rebuilt"):
        classes.allow_item_classes([Derived])
    with pytest.raises(ValueError, match="not an item class"):
        classes.allow_item_classes(["os.system"])
    with pytest.raises(ValueError, match="not an item class"):
        classes.allow_item_classes([dict])


def _entry(**fields: Any) -> str:
    return json.dumps({"u": "http://shop.test/", **fields})


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"mt": {"i": {}}, "it": {"mt": {"i": "os.system"}}}, "unknown_item_class"),
        ({"mt": {"i": {"nope": 1}}, "it": {"mt": {"i": f"{__name__}.Product"}}}, "bad_item"),
        ({"mt": {"i": {"sku": 1, "x": 2}}, "it": {"mt": {"i": f"{__name__}.Offer"}}}, "bad_item"),
        ({"mt": {"i": "text"}, "it": {"mt": {"i": f"{__name__}.Offer"}}}, "bad_items"),
        ({"mt": {}, "it": {"mt": {"i": f"{__name__}.Offer"}}}, "bad_items"),
        ({"it": {"xx": {"i": f"{__name__}.Offer"}}}, "bad_items"),
        ({"it": []}, "bad_items"),
        ({"it": {"kw": {"i": 5}}, "kw": {"i": {}}}, "bad_items"),
    ],
)
def test_hostile_item_entries_are_refused(fields: dict[str, Any], reason: str) -> None:
    with pytest.raises(BadEntry) as exc:
        codec.decode(_entry(**fields))
    assert exc.value.reason == reason
