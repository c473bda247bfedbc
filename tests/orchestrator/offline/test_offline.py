"""The offline chat model (queue, function policy, tools, usage) and its `ResearchPolicy`.

The policy tests drive the model with a tiny tool loop over real workdir tools on fixture
repositories made in `tmp_path`, and validate the final tool calls with the protocol's
pydantic models.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from orchestrator.errors import ModelCallError
from orchestrator.offline import MODEL_NAME, OfflineChatModel, ResearchPolicy
from orchestrator.tools.workdir import workdir_tools
from orchestrator.types import PhasePlan, SubmitFindings


def make_repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


BILLING = {
    "README.md": "# Billing\n\nCreates invoices and applies tax rules.\n",
    "pyproject.toml": "[project]\nname = 'billing'\n",
    "src/billing/__init__.py": '"""Billing: invoices and taxes."""\n',
    "src/billing/invoice.py": (
        '"""Invoice creation and totals."""\n\n\nclass Invoice:\n    pass\n\n\n'
        "def total(items):\n    # TODO: rounding rules for invoices\n    return sum(items)\n"
    ),
    "src/billing/tax.py": '"""Tax rates per country."""\n\n\ndef rate(country):\n    return 0.2\n',
    "docs/usage.md": "# Usage\n\nCall `total` on an invoice.\n",
    "tests/test_invoice.py": "def test_total():\n    assert True\n",
}
WEATHER = {
    "README.md": "# Weather\n\nFetches forecasts.\n",
    "weather/api.py": "from typing import (\n    Any,\n)\n\n\ndef fetch(city):\n    return city\n",
    "weather/cache.py": (
        '#!/usr/bin/env python\n"""\nA small forecast cache.\n"""\n\n\nclass Cache:\n    pass\n'
    ),
    "scripts/fetch.sh": "#!/bin/sh\n# Fetch today's forecast\necho hi\n",
    "config/settings.yaml": "city: Paris\n",
}


def run_agent(model, tools, final, prompt: str, max_steps: int = 15):
    """Minimal tool loop: returns (validated final args, transcript of (name, args))."""
    by_name = {t.name: t for t in tools}
    bound = model.bind_tools([*tools, final])
    messages = [SystemMessage("You are a careful research agent."), HumanMessage(prompt)]
    transcript = []
    for _ in range(max_steps):
        reply = bound.invoke(messages)
        messages.append(reply)
        assert len(reply.tool_calls) == 1, reply
        call = reply.tool_calls[0]
        transcript.append((call["name"], call["args"], call["id"]))
        if call["name"] == final.__name__:
            return final.model_validate(call["args"]), transcript
        result = by_name[call["name"]].invoke(call["args"])
        messages.append(ToolMessage(result, tool_call_id=call["id"]))
    raise AssertionError(f"no {final.__name__} after {max_steps} steps: {transcript}")


def cited_lines_say(repo: Path, text: str, needle: str) -> bool:
    """Every `path:line` cited in `text` is a line of that file where the regex `needle`
    matches, and there is at least one."""
    cited = re.findall(r"([\w./-]+\.\w+):(\d+)", text)
    lines = {p: (repo / p).read_text().splitlines() for p, _ in cited if (repo / p).is_file()}
    return bool(cited) and all(
        p in lines and 0 < int(n) <= len(lines[p]) and re.search(needle, lines[p][int(n) - 1])
        for p, n in cited
    )


def lead_prompt(objective, phase="exploration", max_subtasks=3, agents=""):
    text = f"Objective: {objective}\nPhase: {phase}\nMax subtasks: {max_subtasks}\n"
    return text + (f"Agents: {agents}\n" if agents else "")


def plan_for(repo, objective: str, max_subtasks: int = 4) -> PhasePlan:
    """The offline lead's plan of `repo` for `objective`."""
    plan, _ = run_agent(
        OfflineChatModel(),
        workdir_tools(repo),
        PhasePlan,
        lead_prompt(objective, max_subtasks=max_subtasks),
    )
    return plan


def sub_prompt(objective, subtask, phase="exploration", extra=""):
    return (
        f"Objective: {objective}\nPhase: {phase}\nSubtask: {subtask.id}\n"
        f"Title: {subtask.title}\nDescription: {subtask.description}\n"
        f"Scope: {', '.join(subtask.scope)}\n{extra}"
    )


class TestQueueAndFunctionPolicies:
    def test_queue_serves_replies_in_order_then_fails_clearly(self):
        model = OfflineChatModel(policy=["first", AIMessage(content="second")])
        assert model.invoke("hi").content == "first"
        assert model.invoke([HumanMessage("again")]).content == "second"
        with pytest.raises(ModelCallError, match="queue is empty"):
            model.invoke("third")

    def test_enqueue_comes_before_the_policy(self):
        model = OfflineChatModel(policy=lambda messages, tools: "from policy")
        model.enqueue("queued")
        assert [model.invoke("x").content for _ in range(2)] == ["queued", "from policy"]

    def test_function_policy_sees_messages_and_bound_tools(self):
        seen = {}

        @tool
        def lookup(term: str) -> str:
            """Look a term up."""
            return term

        def policy(messages, tools):
            seen["messages"] = [m.type for m in messages]
            seen["tools"] = [t["function"]["name"] for t in tools]
            return AIMessage(
                content="", tool_calls=[{"name": "lookup", "args": {"term": "x"}, "id": None}]
            )

        reply = (
            OfflineChatModel(policy=policy)
            .bind_tools([lookup, PhasePlan])
            .invoke([SystemMessage("s"), HumanMessage("h")])
        )
        assert seen == {"messages": ["system", "human"], "tools": ["lookup", "PhasePlan"]}
        assert reply.tool_calls[0]["name"] == "lookup"
        assert reply.tool_calls[0]["args"] == {"term": "x"}
        assert reply.tool_calls[0]["id"].startswith("call_")

    def test_queue_is_shared_safely_between_threads(self):
        from concurrent.futures import ThreadPoolExecutor

        replies = [f"reply {i}" for i in range(60)]
        model = OfflineChatModel(policy=replies)
        with ThreadPoolExecutor(max_workers=6) as pool:
            got = list(pool.map(lambda i: model.invoke(f"q{i}").content, range(60)))
        assert sorted(got) == sorted(replies)  # each reply served exactly once

    def test_bad_policy_value_is_refused(self):
        with pytest.raises(TypeError, match="policy 42 is not usable"):
            OfflineChatModel(policy=42)


class TestModelContract:
    def test_usage_and_response_metadata(self):
        messages = [HumanMessage("count these tokens please")]
        reply = OfflineChatModel(policy=["a reply of some length"]).invoke(messages)
        usage = reply.usage_metadata
        assert usage["input_tokens"] == count_tokens_approximately(messages)
        assert usage["output_tokens"] == count_tokens_approximately(
            [AIMessage(content="a reply of some length")]
        )
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert reply.response_metadata["model_name"] == MODEL_NAME == "tether-offline"

    def test_bound_tools_count_towards_input_tokens(self):
        messages = [HumanMessage("plan")]
        plain = OfflineChatModel(policy=["ok"]).invoke(messages)
        bound = OfflineChatModel(policy=["ok"]).bind_tools([PhasePlan]).invoke(messages)
        assert bound.usage_metadata["input_tokens"] > plain.usage_metadata["input_tokens"]

    def test_input_tokens_are_langchains_estimate_with_the_bound_tools(self, tmp_path):
        # the estimate counts every bound tool's schema: the same figure for each new set of
        # tool objects over the same functions (a run builds its own), and for a caller's dict
        custom = {"type": "function", "function": {"name": "ping", "parameters": {}}}
        messages = [SystemMessage("be brief"), HumanMessage("plan the work")]
        for _ in range(2):
            tools = [*workdir_tools(tmp_path), SubmitFindings, custom]
            bound = OfflineChatModel(policy=["ok"]).bind_tools(tools)
            reply = bound.invoke(messages)
            expected = count_tokens_approximately(messages, tools=bound.kwargs["tools"])
            assert reply.usage_metadata["input_tokens"] == expected
            assert [t["function"]["name"] for t in bound.kwargs["tools"]] == [
                "list_files", "read_file", "grep_files", "SubmitFindings", "ping"
            ]  # fmt: skip

    def test_tool_call_ids_unique_and_deterministic(self):
        def two_calls(messages, tools):
            calls = [{"name": "t", "args": {"a": 1}, "id": None}] * 2
            return AIMessage(content="", tool_calls=calls)

        ids = [
            [c["id"] for c in OfflineChatModel(policy=two_calls).invoke("same").tool_calls]
            for _ in range(2)
        ]
        assert ids[0] == ids[1] and len(set(ids[0])) == 2
        other = OfflineChatModel(policy=two_calls).invoke("different").tool_calls
        assert other[0]["id"] not in ids[0]

    def test_async_invoke(self):
        model = OfflineChatModel(policy=["async ok"])
        assert asyncio.run(model.ainvoke("hi")).content == "async ok"


class TestResearchPolicySubagent:
    @pytest.fixture
    def billing(self, tmp_path):
        repo = make_repo(tmp_path / "billing", BILLING)
        tools = workdir_tools(repo)
        plan, _ = run_agent(
            OfflineChatModel(), tools, PhasePlan, lead_prompt("How are invoices taxed?")
        )
        return repo, tools, plan

    def test_findings_cite_files_it_read(self, billing):
        repo, tools, plan = billing
        sub = plan.subtasks[0]
        findings, transcript = run_agent(
            OfflineChatModel(), tools, SubmitFindings, sub_prompt("How are invoices taxed?", sub)
        )
        names = [name for name, _, _ in transcript]
        assert names[0] == "list_files" and names[-1] == "SubmitFindings"
        assert {"read_file", "grep_files"} <= set(names)
        read = {args["path"] for name, args, _ in transcript if name == "read_file"}
        assert 2 <= len(read) <= 4
        assert findings.status == "completed"
        cited = {f.path for f in findings.files}
        assert read <= cited and all((repo / p).is_file() for p in cited)
        notes = {f.path: f.description for f in findings.files}
        assert notes["src/billing/invoice.py"].startswith("Invoice creation and totals.")
        assert any("Invoice" in d and "total" in d for d in findings.key_discoveries)
        # the TODO is review's to report (once per task), citing the line that holds it
        assert not any("TODO" in d for d in findings.key_discoveries)
        review, _ = run_agent(
            OfflineChatModel(),
            tools,
            SubmitFindings,
            sub_prompt("How are invoices taxed?", sub, phase="review"),
        )
        todo = [d for d in review.key_discoveries if "TODO" in d]
        assert todo and all(cited_lines_say(repo, d, "TODO") for d in todo)
        # one grep ran on the stems of the objective's words (`invoices` finds `Invoice`,
        # `taxed` finds `tax`); the finding names the terms actually searched and the real
        # count of lines holding either
        lines = [
            ln
            for s in sub.scope
            for f in sorted((repo / s).rglob("*"))
            if f.is_file()
            for ln in f.read_text().splitlines()
            if re.search("invoic|tax", ln, re.IGNORECASE)
        ]
        assert f"{len(lines)} line(s) in" in next(
            d for d in findings.key_discoveries if "match 'invoic|tax'" in d
        )
        assert "src/billing" in findings.summary

    def test_the_workdir_name_is_not_searched_for(self, tmp_path):
        # "how does <project> ..." asked in the project's own folder: its name is in every
        # file's imports, so the search goes to the objective's next word
        repo = make_repo(tmp_path / "paymentsuite", BILLING)
        tools = workdir_tools(repo)
        objective = "How does paymentsuite tax invoices?"
        plan, _ = run_agent(OfflineChatModel(), tools, PhasePlan, lead_prompt(objective))
        _, transcript = run_agent(
            OfflineChatModel(), tools, SubmitFindings, sub_prompt(objective, plan.subtasks[0])
        )
        greps = [args["pattern"] for name, args, _ in transcript if name == "grep_files"]
        assert greps and greps[0] == "invoic"
        assert not any("paymentsuit" in g for g in greps)

    @pytest.mark.parametrize(
        "phase, expected",
        [
            ("implementation", "Likely change point: Invoice in src/billing/invoice.py."),
            ("review", "Check that Invoice in src/billing/invoice.py is covered by a test."),
            ("planning", "Step 1: understand src/billing/invoice.py before changing it."),
        ],
    )
    def test_phase_specific_recommendations(self, billing, phase, expected):
        _, tools, plan = billing
        prompt = sub_prompt("How are invoices taxed?", plan.subtasks[0], phase=phase)
        findings, _ = run_agent(OfflineChatModel(), tools, SubmitFindings, prompt)
        assert expected in findings.recommendations

    def test_same_input_same_output(self, billing):
        _, tools, plan = billing
        prompt = sub_prompt("How are invoices taxed?", plan.subtasks[0])
        runs = [run_agent(OfflineChatModel(), tools, SubmitFindings, prompt) for _ in range(2)]
        assert json.dumps(runs[0][0].model_dump()) == json.dumps(runs[1][0].model_dump())
        assert runs[0][1] == runs[1][1]  # same calls, same arguments, same ids

    def test_max_steps_bounds_the_tool_calls(self, billing):
        _, tools, plan = billing
        prompt = sub_prompt("How are invoices taxed?", plan.subtasks[0], extra="Max steps: 3\n")
        findings, transcript = run_agent(OfflineChatModel(), tools, SubmitFindings, prompt)
        assert len(transcript) == 3 and transcript[-1][0] == "SubmitFindings"

    def test_finishes_when_told_or_forced(self, billing):
        _, tools, plan = billing
        prompt = sub_prompt("How are invoices taxed?", plan.subtasks[0])
        model = OfflineChatModel()
        messages = [HumanMessage(prompt)]
        first = model.bind_tools([*tools, SubmitFindings]).invoke(messages)
        assert first.tool_calls[0]["name"] == "list_files"
        result = tools[0].invoke(first.tool_calls[0]["args"])
        messages += [first, ToolMessage(result, tool_call_id=first.tool_calls[0]["id"])]
        # forcing the final tool ends the work at once, with the evidence so far
        forced = model.bind_tools([*tools, SubmitFindings], tool_choice="SubmitFindings")
        reply = forced.invoke(messages)
        assert reply.tool_calls[0]["name"] == "SubmitFindings"
        findings = SubmitFindings.model_validate(reply.tool_calls[0]["args"])
        assert findings.status == "partial" and not findings.files  # listed, none examined
        # so does a human turn after the work started
        nudged = messages + [HumanMessage("Step budget exhausted: finish now.")]
        reply = model.bind_tools([*tools, SubmitFindings]).invoke(nudged)
        assert reply.tool_calls[0]["name"] == "SubmitFindings"

    def test_missing_keyword_becomes_an_open_question(self, tmp_path):
        repo = make_repo(tmp_path / "weather", WEATHER)
        tools = workdir_tools(repo)
        sub = PhasePlan.model_validate(
            {
                "strategy": "s",
                "subtasks": [
                    {"id": "x", "title": "Survey weather", "description": "d", "scope": ["weather"]}
                ],
            }
        ).subtasks[0]
        findings, _ = run_agent(
            OfflineChatModel(), tools, SubmitFindings, sub_prompt("retries", sub)
        )
        assert any("No line of weather matches 'retri'" in q for q in findings.open_questions)
        # no test anywhere in the workdir: no finding about one area's tests (the lead's
        # plan says it once for the workdir)
        said = findings.key_discoveries + findings.recommendations + findings.open_questions
        assert not any("test" in d.lower() for d in said)
        plan, _ = run_agent(OfflineChatModel(), tools, PhasePlan, lead_prompt("retries"))
        assert "The workdir ships no test file (5 files listed)" in " ".join(plan.constraints)
        notes = {f.path: f.description for f in findings.files}
        assert notes == {
            "weather/api.py": "no docstring or heading. 7 lines read; defines fetch (line 6)",
            "weather/cache.py": "A small forecast cache. 8 lines read; defines Cache (line 7)",
        }


class TestResearchPolicyChat:
    def test_plain_chat_is_extractive(self):
        text = "Summarise this.\n" + "\n".join(f"filler line {i}" for i in range(30))
        text += "\nERROR: disk full\nlast line"
        reply = OfflineChatModel().invoke([HumanMessage(text)])
        assert not reply.tool_calls
        lines = reply.content.splitlines()
        assert lines[0] == "Summarise this." and "ERROR: disk full" in lines
        assert set(lines) <= set(text.splitlines())

    def test_research_policy_is_a_plain_callable(self):
        reply = ResearchPolicy()([HumanMessage("hello there")], [])
        assert reply.content == "hello there"


# -- findings that QA found misleading ------------------------------------------------------

CORE = {
    "README.md": "# Core\n\nA library with a core package and a benchmark.\n",
    **{
        f"core/mod{i}.py": f'"""Core module {i}."""\n\n\ndef step{i}(x):\n    return x\n'
        for i in range(6)
    },
    "core/__init__.py": '"""The core package."""\n',
    "core/notes.py": (
        '"""Notes: mentions of TODO that are not TODO comments."""\n\nimport re\n\n'
        '_TODO_RE = re.compile(r"#\\s*(TODO|FIXME)")  # finds notes in comments\n'
        'SAMPLE = "x = 1\\n# TODO: not a real note"\n'
        "TEMPLATE = '''\n"
        "def f():\n"
        "    # TODO: fixture text inside a multi-line string\n"
        "'''\n\n\n"
        "def keep(x):\n"
        "    # TODO: a real note\n"
        "    return x  # FIXME: another real note\n"
    ),
    "bench/README.md": "# Benchmarks\n\nHow fast the core is.\n",
    "bench/speed.py": '"""Speed benchmark."""\n\n\ndef run():\n    return 1\n',
    "docs/guide.md": "# Guide\n\nLeave TODO notes for later; <!-- TODO: add a diagram -->\n",
    "tests/core/test_mod0.py": "def test_step0():\n    assert True\n",
    "tests/core/test_mod1.py": "def test_step1():\n    assert True\n",
    "tests/test_speed.py": "def test_run():\n    assert True\n",
}
SURVEY = "Survey this repository: what each package does and how they fit"


def subagent(repo, scope, phase, objective=SURVEY, title="Survey"):
    sub = PhasePlan.model_validate(
        {
            "strategy": "s",
            "subtasks": [
                {"id": "x", "title": f"{title} {scope}", "description": "d", "scope": [scope]}
            ],
        }
    ).subtasks[0]
    prompt = sub_prompt(objective, sub, phase=phase, extra="Max steps: 7\n")
    return run_agent(OfflineChatModel(), workdir_tools(repo), SubmitFindings, prompt)[0]


class TestFindingsQuality:
    def test_only_real_todo_comments_count(self, tmp_path):
        repo = make_repo(tmp_path / "core", CORE)
        findings = subagent(repo, "core", "review")
        notes = [d for d in findings.key_discoveries if "note at" in d]
        # the regex, the string literals and the multi-line fixture text do not count
        assert re.findall(r"core/notes\.py:(\d+)", " ".join(notes)) == ["14", "15"]
        assert all(cited_lines_say(repo, d, r"# (TODO|FIXME):") for d in notes)
        assert "2 TODO/FIXME comment(s)" in findings.summary
        # exploring does not read notes.py: a grep for triple quotes tells the fixture apart
        # (it counts them; the notes themselves are review's to report)
        explored = subagent(repo, "core", "exploration")
        assert "2 TODO/FIXME comment(s)" in explored.summary
        assert not any("notes.py:1" in d for d in explored.key_discoveries)
        docs = subagent(repo, "docs", "implementation")  # prose: only `<!-- TODO` counts
        assert "1 TODO/FIXME comment(s)" in docs.summary

    def test_tests_elsewhere_in_the_workdir_are_found(self, tmp_path):
        repo = make_repo(tmp_path / "core", CORE)
        findings = subagent(repo, "core", "exploration")
        text = "\n".join(findings.key_discoveries + findings.recommendations)
        assert "No test file" not in text and "No test files" not in text
        tests_line = next(d for d in findings.key_discoveries if d.startswith("Tests for core"))
        assert "tests/core/test_mod0.py" in tests_line and "test_speed" not in tests_line
        # the benchmark's test is found by its name, not its folder
        bench = subagent(repo, "bench", "exploration")
        assert any("tests/test_speed.py" in d for d in bench.key_discoveries)

    def test_review_never_asks_to_test_the_tests(self, tmp_path):
        repo = make_repo(tmp_path / "core", CORE)
        findings = subagent(repo, "tests", "review", objective="Review test_step0 and run")
        assert not any("covered by a test" in r for r in findings.recommendations)
        # about what the tests cover instead: modules no test file is named after
        gap = next(d for d in findings.key_discoveries if d.startswith("No test file is named"))
        assert "core/mod2.py" in gap and "core/mod0.py" not in gap and "bench/speed.py" not in gap
        assert all((repo / p).is_file() for p in re.findall(r"[\w/]+\.py", gap))

    def test_filler_words_do_not_rank_and_every_package_gets_a_phase(self, tmp_path):
        files = dict(CORE)
        files.update({f"fit/extra{i}.py": "x = 1\n" for i in range(1)})  # named like "fit"
        files.update({f"{n}/a.py": "x = 1\n" for n in ("alpha", "beta", "gamma")})
        repo = make_repo(tmp_path / "core", files)
        chosen = []
        for phase in ("exploration", "planning", "implementation", "review"):
            plan, _ = run_agent(
                OfflineChatModel(),
                workdir_tools(repo),
                PhasePlan,
                lead_prompt(SURVEY, phase=phase, max_subtasks=2),
            )
            chosen.append([s.scope[0] for s in plan.subtasks])
        # the biggest source package leads while the objective names no area
        assert chosen[0][0] == "core" and "fit" not in chosen[0]
        covered = {scope for scopes in chosen for scope in scopes}
        assert {"core", "bench", "alpha", "beta", "gamma", "fit"} <= covered

    def test_phases_say_different_things_about_one_area(self, tmp_path):
        # the same fact once per task: no line, no `file:line` cited and no search result
        # is reported by two phases
        repo = make_repo(tmp_path / "core", CORE)
        seen: dict[str, str] = {}
        facts: dict[str, str] = {}
        for phase in ("exploration", "planning", "implementation", "review"):
            findings = subagent(repo, "core", phase)
            for line in findings.key_discoveries:
                assert line not in seen, f"{phase} repeats {seen.get(line)}: {line}"
                seen[line] = phase
                cited = re.findall(r"[\w/]+\.py:\d+|match '[^']+'|Tests for|No test file", line)
                for fact in set(cited):
                    assert fact not in facts, f"{phase} repeats {facts[fact]}'s {fact}: {line}"
                    facts[fact] = phase
        phases = set(seen.values())
        assert phases == {"exploration", "planning", "implementation", "review"}
        assert any(d.startswith("Modules of core:") for d in seen if seen[d] == "exploration")
        assert any("(line " in d for d in seen if seen[d] == "implementation")
        review = [d for d in seen if seen[d] == "review"]
        assert any(d.startswith("No test file is named after") for d in review)
        assert any("core/notes.py:14" in d for d in review)
        assert not any("biggest" in d.lower() for d in seen)  # size is no risk by itself
