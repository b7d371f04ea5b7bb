"""``python -m tqaforge`` runs the CLI."""

from tqaforge.cli import app

app()
