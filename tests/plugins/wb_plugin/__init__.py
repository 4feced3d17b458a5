"""A policy and a benchmark defined outside the workbench, for its tests."""
