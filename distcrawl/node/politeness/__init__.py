"""A node's politeness beside its scheduler: what each site's robots.txt asks (its Crawl-delay,
a hold while it cannot be read), the server budgets shared by the sites of one address, and the
holds a node learns from its own answers."""

from distcrawl.node.politeness.hub import Politeness

__all__ = ["Politeness"]
