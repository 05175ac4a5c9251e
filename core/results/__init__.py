"""What a run produced, and readings of results: the record, how a fit ended, spread, agreement, reach."""
