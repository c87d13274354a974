"""Operations: what operators read and do to a crawl (its status, dead letters, control,
seeds, migration, journals), through the frontier's API; the faces (``commands``, ``web``)
are thin adapters over it."""
