"""Browser pages. Reads go through the selectors, writes through the services."""
