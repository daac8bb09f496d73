"""One package per backend: the only code of the library that knows a backend's client.

- `sqlite`: the embedded default, the memory store and the association graph in one
  SQLite file (standard library);
- `local`: archived originals in a local folder;
- `weaviate`: the production memory store (extra `[weaviate]`);
- `neo4j`: the production association graph, over Bolt (extra `[neo4j]`);
- `s3`: archived originals in S3-compatible object storage (extra `[s3]`).

Each implements the ports of `tiered_memory.ports`, and the optional capabilities
declared there when it can do better than the port. Nothing imports a backend until it
is wired (`tiered_memory.config`, `AsyncTieredMemory.embedded`).
"""
