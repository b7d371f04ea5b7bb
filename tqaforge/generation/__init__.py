"""tqaforge.generation."""
