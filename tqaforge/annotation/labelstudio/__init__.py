"""Label Studio: the local server, label configurations and sync (one module each).

- :mod:`.server`: start, wait for and stop a local server;
- :mod:`.registry`: one entry per annotation kind: its label configuration (``configs/KIND.xml``),
  its pending items, its task data and how a result becomes our label;
- :mod:`.client`: the HTTP client, every call retried with backoff;
- :mod:`.sync`: :func:`~.sync.push` and :func:`~.sync.pull`.
"""
