"""Models built on fastsoftmax losses."""
