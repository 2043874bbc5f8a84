"""Helpers for training code that runs as an ml-platform TrainingJob."""
