"""The app's main script (Home.py), in a folder of its own: see its docstring."""
