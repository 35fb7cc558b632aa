"""Autocast regions: where code runs under autocast, on which device and dtype, and code that runs
only for one precision.
"""
