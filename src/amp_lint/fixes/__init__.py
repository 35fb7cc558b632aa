"""Fix builders shared by rules (fp32 island, .float(), .to(dtype), finfo, clone) and the
machinery that applies a file's fixes in one pass."""
