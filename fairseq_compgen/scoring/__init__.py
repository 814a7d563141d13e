"""Scoring of fairseq-generate output (sequence-level exact match, per category)."""
