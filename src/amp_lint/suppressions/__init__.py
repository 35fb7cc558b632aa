"""Suppression comments (noqa), which of them suppressed nothing, and adding them."""
