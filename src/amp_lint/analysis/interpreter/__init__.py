"""The dtype interpreter: statements, expressions, calls within and across files, containers. Its
modules import each other (one cycle, kept inside this package).
"""
