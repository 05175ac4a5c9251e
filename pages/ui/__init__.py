"""What several pages share, one concept per module; a page's own panels live beside it."""
