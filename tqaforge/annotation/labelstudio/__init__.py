"""Label Studio: the local server, label configurations and sync (one module each)."""
