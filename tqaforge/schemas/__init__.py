"""tqaforge.schemas."""
