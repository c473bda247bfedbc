"""Ranked recall over all of memory, on every backend.

* `recall.py`: `search(backend, query, scope, limit)`, what `memory search`,
  `recall_memory` and the context builder use: the query and scope checked, the backend's
  index brought up to date, its hits ranked (each kind of record weighed by
  `SOURCE_WEIGHTS`) and turned into `SearchResult`s with citations people read
  (`path#Lx-Ly`, `mem-...#chunk`);
* `when.py`: the days a question names ("on March 3", "yesterday"), so recall can prefer
  the messages written on them.

Invariant: a citation names a line range that holds the snippet shown, on every backend;
a query is refused (one error) rather than guessed at. May import `memory.contract`,
`memory.text`, `memory.errors`.
"""
