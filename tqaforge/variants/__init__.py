"""Robustness variants: the grid of items x perturbations x seeds, its prompts file, and the
side-by-side view of a variant. Uses the pure ``tables`` layer for the perturbations and the
serializations, and the store for the records."""
