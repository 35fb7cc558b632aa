"""Custom autograd Functions and the autograd graph under autocast."""
