"""Long-term memory across tasks, and the files and tools through which agents keep it.

* `memfiles.py`: the memory files an agent may read and write (facts `facts/*.md`,
  episodes `episodes/*.md`, a task's `overview.md` and `detail/*.md` notes): confined
  paths, `> Summary:` lines, five operations (list, read, write, patch, append);
* `longterm.py`: episodes (`episodes/YYYY-MM.md`), their index, and the "Available
  memory" message a task's first lead call gets;
* `tools.py`: the LangChain tools over memory (`memory_tools`: recall, the five file
  operations, `memory_log`, `memory_fetch`; `longterm_tools` for the reflector), each a
  thin wrapper that turns an error into one line the agent can act on;
* `reflect.py`: the post-task reflector, which records what is worth remembering across
  tasks (with a chat model, or deterministically without one).

Invariant: every path an agent gives is confined to the memory, and only facts,
episodes and a task's notes are writable; a replaced fact stays readable, struck through
with its date. May import `memory.search`, `memory.text`, `memory.templating`,
`memory.paths`, `memory.clock`, `memory.errors`.
"""
