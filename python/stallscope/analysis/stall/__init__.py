"""The stall table: every instant of a step attributed to one category (see `_table`)."""
