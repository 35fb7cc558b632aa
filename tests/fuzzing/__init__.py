"""Fuzzing amp-lint: the harness, generated programs and fixture mutants (tests/test_fuzz.py)."""
