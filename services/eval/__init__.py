"""Blind evaluations: variants of one modality run on a prompt set, rated in pairs, reported with honest
statistics (services/eval/stats.py)."""
