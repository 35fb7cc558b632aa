def apply_mask(scores, mask):
    return scores.masked_fill(mask, -1e9)
