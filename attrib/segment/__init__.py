"""How one segment of the range is searched for its change: by one posterior over every block
(posterior_search.py, the default) or by sequential tests per probe (sequential_search.py,
a method of the product: it assumes no level model, docs/statistics.md). Both ask the evaluation stage only through `Evidence`."""
