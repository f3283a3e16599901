"""Whole-vault workflows over an open vault: decay, reflection, contradiction checks and review."""
