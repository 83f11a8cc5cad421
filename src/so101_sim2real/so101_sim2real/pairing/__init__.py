"""Pairing: clock alignment and resampling of real and sim runs into a paired dataset."""
