"""distcrawl: Scrapy spiders on many machines sharing one lossless Redis frontier."""

__version__ = "0.1.0"
