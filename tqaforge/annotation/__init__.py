"""tqaforge.annotation."""
