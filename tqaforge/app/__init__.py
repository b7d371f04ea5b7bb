"""tqaforge.app."""
