"""The shared crawl frontier in Redis: queue, dupefilter, leases, retries, dead letters.

The whole key layout and every atomic operation live in ``frontier.lua``;
``store.py`` calls it, ``scheduler.py`` is the Scrapy scheduler built on it.
"""
