"""The frontier's Redis protocol: the Lua library (``distcrawl/frontier/lua``) assembled by
:mod:`.loader`, the commands' arguments declared in :mod:`.spec`, calls run by :mod:`.runner`,
and one module per family of commands that encodes their calls and decodes their replies:
:mod:`.sync` (a node's flush), :mod:`.membership` (heart-beats, claims, seeds, recoveries),
:mod:`.dupefilter`, :mod:`.budgets`, :mod:`.dead`, :mod:`.revisit`, :mod:`.admin` (operator
writes)."""
