"""tqaforge.release."""
