"""Data generation, reading and writing for compositional-generalization benchmarks."""
