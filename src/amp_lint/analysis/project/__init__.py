"""The files of a run as a program: module names, imports, entry points, facts read without
parsing, memo across runs.
"""
