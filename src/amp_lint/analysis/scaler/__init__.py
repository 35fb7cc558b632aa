"""GradScaler facts: scalers, their origin, the order of scale, unscale, clip, step and update,
losses.
"""
