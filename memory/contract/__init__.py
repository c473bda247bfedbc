"""The storage contract: what every memory backend provides, and what it gets for free.

* `base.py`: `BaseBackend`, the 14 abstract primitives on documents, the search index and
  entries, plus the record operations every backend gets;
* `records.py`: the contract's records (documents, search rows, tasks, subagents, locks) and
  the input checks every backend shares (re-exported by `base.py`);
* `entries.py`: entries, large outputs kept outside the token window: the `Entry` record,
  its tiers, chunks, ids, pruning;
* `conveniences.py`: what a backend gets built on the primitives (text, JSON lines,
  compare-and-set updates, a mutex, entry upkeep, claims, the task lock, export);
* `doc_records.py`: task records, the subagent registry and task leases kept as JSON
  documents (the default implementation, built on the document primitives);
* `capabilities.py`: what a backend may do beyond the contract, each a small protocol
  checked with `isinstance`.

Invariant: everything here is written against the primitives alone, never against one
backend; a write names the version it expects, so two writers never lose an update.
`memory/backends/conformance.py` holds the tests every backend passes. May import
`memory.text`, `memory.clock`, `memory.errors`.
"""
