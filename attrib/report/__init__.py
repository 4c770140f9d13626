"""Reports: a result rendered as markdown (with a sparkline) and as a PNG plot."""
