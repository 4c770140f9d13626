"""Evaluation: everything that turns a commit into a verdict against a reference: builds
(executors), runs (runners, gpu) and the rounds of the sequential test."""
