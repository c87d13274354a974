"""What goes wrong on a node, and who is told: its failures grouped and its products' fields
counted (``buffer``, ``capture``), sent with its heartbeat; findings judged and notices sent
(``watch``, ``alerts``)."""
