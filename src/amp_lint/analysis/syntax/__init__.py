"""Facts read from syntax alone: outlines, imported names, literals, contractions, what names
say."""
