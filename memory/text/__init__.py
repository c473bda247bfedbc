"""Text without a model: token estimates, extractive summaries, slugs, keywords.

* `tokens.py`: the token estimator (four characters a token, LangChain's rule) and the
  count of chat messages, so the `memory` command and the orchestrator agree without a
  tokenizer;
* `summarize.py`: model-free extractive summaries of tool output and prose (the text's own
  lines, picked by priority within a token budget);
* `names.py`: the slug made from prose (file names from titles, ids from objectives);
* `words.py`: the one stopword list, the keywords of a text, the words every log is full of,
  the forms of an irregular verb.

Invariant: pure functions of their arguments: no I/O, no clock, no model, the same text in
gives the same text out. May import nothing of tether's but `memory.errors`.
"""
