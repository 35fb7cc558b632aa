"""One run of `amp-lint check`: the files as a project, the process pool, the engine per file, the
result cache.
"""
