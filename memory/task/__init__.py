"""One task's memory: its working memory, the archive of its conversation, its STATUS.md.

* `working.py`: `WorkingMemory`, a task's `overview.md` (always in the lead's context),
  its `detail/*.md` notes and its `messages.jsonl` log, documents of the store's backend;
* `archive.py`: `Archive`, the never-delete archive and the multi-level summary tree of the
  task's conversation (every N turns a level-1 summary, `fanout` summaries of one level
  folded into one of the next);
* `status_file.py`: the marked block about one task in a project's `STATUS.md` (where its
  memory is, its checkpoint, plan, snapshot, findings and entries), every line a person
  wrote around it kept byte for byte.

Invariant: `messages.jsonl` only grows, and nothing is ever removed or rewritten: a summary
file *names* the lines or summaries it covers and is the one write of a summarisation, so a
kill leaves either no summary or a complete one. May import `memory.contract`,
`memory.text`, `memory.templating`, `memory.paths`, `memory.durable`, `memory.clock`,
`memory.errors`.
"""
