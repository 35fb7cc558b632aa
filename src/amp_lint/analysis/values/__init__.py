"""Values and dtypes: the dtype lattice and promotion, what each op does to dtypes, the per-release
autocast op tables.
"""
