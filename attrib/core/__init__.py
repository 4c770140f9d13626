"""The pure core: vocabulary, statistics and search. Takes data, returns data; imports nothing
of attrib outside this package, and no I/O, clocks or randomness of its own."""
