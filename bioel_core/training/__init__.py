"""Training encoders: pair construction, online hard-triplet mining, the multi-similarity loss and the loop.

Kept apart from `bioel_core.models`: a model is a saved artifact, training is one way to produce it.
"""
