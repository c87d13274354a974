"""The shared crawl frontier in Redis, without Scrapy: queue, dupefilter, leases, retries, dead
letters and site budgets, split into shards by site.

``keys.py`` declares every key (the key schema); ``lua/`` is the Redis protocol, one Lua file
per command, assembled and called by ``protocol/``; ``store.py`` is the API the node and the
operator tools call.
"""
