"""relaybot's benchmarks: ``python -m bench`` runs them all and prints one summary table.

Sections (each also runnable alone, ``python -m bench.<name>``): ``parse`` (provider stream
throughput against the vendor SDKs), ``pipeline`` (per-delta CPU from a provider event to the
channel call), ``scale`` (concurrent conversations into a recording channel), ``redaction``
(the live redaction window per byte). Figures and the machine they came from: bench/README.md.
The SDKs are bench-only dependencies (``pip install -e '.[bench]'``); the product never imports
them.
"""
