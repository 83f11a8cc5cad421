"""The so101 command line, the SO-101 graphs (launch files and in-process composition), demo and benchmarks."""
