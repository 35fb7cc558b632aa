"""Parsing guarded against pathological input, and the cheap first pass that decides which files
need a parse.
"""
