"""Facts about the code (names, autocast regions, dtypes, calls); no opinions about it."""
