"""Answer annotation: agents, parsing, voting."""
