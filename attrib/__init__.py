"""attrib: attribute a benchmark regression to the commit(s) that caused it."""

__version__ = "0.1.0"
