"""How products are stored: the document shape and its upserts (``documents``), the blocking
MongoDB writer that runs in a worker thread (``writer``), and the local journal that holds
items while MongoDB is unreachable (``journal``). The Scrapy side is
:class:`distcrawl.node.pipeline.MongoPipeline`."""
