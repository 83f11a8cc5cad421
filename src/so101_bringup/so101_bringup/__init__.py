"""The so101 command line, in-process composition of the SO-101 graph, demo and benchmarks."""
