"""Fix builders shared by rules (fp32 island, .float(), .to(dtype), finfo, clone), AMP401's
`torch.amp` call rewrite (amp_api.py) and the machinery that applies a file's fixes in one
pass."""
