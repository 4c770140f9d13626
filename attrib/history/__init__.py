"""The nightly history: results per series, change points on them, and the way from a change
point to a bisection. store.py (SQLite, the schema), ingest.py (files -> rows), order.py
(first-parent order), detection.py (the pure detector over stored series), flagging.py (the
daemon's change point -> job), plot.py (the series as SVG); its commands are attrib/cli/history.py's."""
