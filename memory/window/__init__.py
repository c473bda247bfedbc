"""What fills one model call's context window: the budgeted context of a lead call.

* `context.py`: `ContextBuilder` / `build_context`, the messages of one call in priority
  order (system prompt, the task's overview, active summaries, recalled snippets, recent
  turns), each part within its token budget, and the fill of what budget is left with
  further recall;
* `_context_parts.py`: the parts of one built context and the messages they make; every
  token count of the whole context goes through its `assemble()`.

Invariant: a built context never exceeds its total budget, counted over the returned
messages exactly as `memory.text.tokens.count_tokens` counts them, and every part left out
is named with a citation the agent can recall it by. May import `memory.task`,
`memory.facts`, `memory.backends.blocks`, `memory.text`, `memory.errors`.
"""
