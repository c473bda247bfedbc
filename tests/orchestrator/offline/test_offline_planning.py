"""The offline lead's plans: areas of the workdir grouped, split and ranked by the objective,
one subtask each (helpers shared with `test_offline.py`)."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, ToolMessage

from orchestrator.offline import OfflineChatModel, ResearchPolicy
from orchestrator.tools.workdir import workdir_tools
from orchestrator.types import PhasePlan
from tests.orchestrator.offline.test_offline import (
    BILLING,
    WEATHER,
    lead_prompt,
    make_repo,
    plan_for,
    run_agent,
)


class TestResearchPolicyLead:
    def test_lists_first_then_plans_valid_subtasks_with_real_scopes(self, tmp_path):
        repo = make_repo(tmp_path / "billing", BILLING)
        plan, transcript = run_agent(
            OfflineChatModel(),
            workdir_tools(repo),
            PhasePlan,
            lead_prompt("How are invoices taxed?", agents="explorer, reviewer"),
        )
        assert [name for name, _, _ in transcript] == ["list_files", "PhasePlan"]
        assert 1 <= len(plan.subtasks) <= 3
        assert len({s.id for s in plan.subtasks}) == len(plan.subtasks)
        for sub in plan.subtasks:
            assert sub.scope and all((repo / p).exists() for p in sub.scope), sub
            assert sub.agent == "explorer"  # matches the phase, from the Agents line
            assert sub.title.startswith("Survey")
        # the package whose files mention the objective's words comes first
        assert plan.subtasks[0].scope == ["src/billing"]
        assert "How are invoices taxed" in plan.strategy or "invoices" in plan.strategy

    def test_a_folder_past_the_listings_cut_is_planned_by_its_name(self, tmp_path):
        files = {f"app{i}/mod{j}.py": "x = 1\n" for i in range(4) for j in range(6)}
        files |= {"importlib/_bootstrap.py": '"""Core of the import system."""\n'}
        repo = make_repo(tmp_path / "lib", files)
        model = OfflineChatModel(policy=ResearchPolicy(listing_entries=10))
        plan, transcript = run_agent(
            model, workdir_tools(repo), PhasePlan, lead_prompt("Where is import implemented?")
        )
        listing = transcript[0]
        assert listing[0] == "list_files" and listing[1]["max_entries"] == 10
        assert plan.subtasks[0].scope == ["importlib"]  # named by the objective, never listed
        assert plan.subtasks[0].description.startswith("Map the files, entry points and main ")
        assert "importlib (1 file(s))" in plan.subtasks[0].description
        # "implemented" is as empty as "implement": only "import" ranks the areas
        assert "ranked by the objective's words (import):" in plan.strategy

    def test_a_flat_package_s_files_named_by_the_objective_are_in_scope(self, tmp_path):
        # many modules side by side (a package like `rich/`): the top-level area's scope
        # holds the files the objective names, not the first ten names alphabetically
        files = {f"_mod{i:02d}.py": f'"""Module {i}."""\n' for i in range(30)}
        files |= {"live.py": '"""Live display refresh."""\n', "data/x.py": "x = 1\n"}
        repo = make_repo(tmp_path / "pkg", files)
        plan = plan_for(repo, "Where is the live display refreshed?")
        top = next(s for s in plan.subtasks if "data" not in s.scope)
        assert "live.py" in top.scope and len(top.scope) == 10
        # with room for four subagents, the next loose files go to further subagents
        loose = [s.scope for s in plan.subtasks if s.scope != ["data"]]
        assert len(plan.subtasks) == 4 and len(loose) == 3
        assert all(len(scope) == 10 for scope in loose)
        assert len({p for scope in loose for p in scope}) == 30  # no file twice

    def test_a_split_folder_s_own_files_go_to_further_subagents_by_the_objective(self, tmp_path):
        # a package with one subfolder beside 17 modules (like `httpx/`): its own files are
        # ranked by the objective and, with room, all of them are surveyed, ten to an area
        files = {f"pkg/_m{i:02d}.py": f'"""Module {i}."""\n' for i in range(16)}
        files |= {"pkg/_redirects.py": '"""Redirects."""\nMAX_REDIRECTS = 20\n'}
        files |= {f"pkg/_transports/t{i}.py": "x = 1\n" for i in range(4)}
        repo = make_repo(tmp_path / "lib", files)
        plan = plan_for(repo, "What limits the number of redirects?")
        own = [s for s in plan.subtasks if s.scope != ["pkg/_transports"]]
        assert [s.title for s in own] == [
            "Survey pkg (top level)",
            "Survey pkg (top level, files 11-17)",
        ]
        assert "pkg/_redirects.py" in own[0].scope  # named by the objective: read first
        assert len({p for s in own for p in s.scope}) == 17  # every module, none twice

    def test_a_big_folder_with_many_parts_takes_the_room_before_a_small_one(self, tmp_path):
        # like npm: lib/ (commands 30, utils 15, cli 2, 5 own files) beside a small bin/
        # (5 files and a 2-file subfolder): with room for four subagents, lib/'s biggest
        # part gets one and the rest of lib/ another; bin/ is not cut in two
        files = {f"lib/commands/c{i:02d}.js": "x = 1\n" for i in range(30)}
        files |= {f"lib/utils/u{i:02d}.js": "x = 1\n" for i in range(15)}
        files |= {f"lib/cli/k{i}.js": "x = 1\n" for i in range(2)}
        files |= {f"lib/m{i}.js": "x = 1\n" for i in range(5)}
        files |= {f"bin/b{i}.js": "x = 1\n" for i in range(5)}
        files |= {f"bin/gyp/g{i}": "x = 1\n" for i in range(2)}
        files |= {"README.md": "# tool\n"}
        repo = make_repo(tmp_path / "tool", files)
        plan = plan_for(repo, "Map the project")
        scopes = {s.title.removeprefix("Survey "): s.scope for s in plan.subtasks}
        assert set(scopes) == {
            "bin",
            "lib/commands",
            "lib (other than commands)",
            "top-level files",
        }
        rest = scopes["lib (other than commands)"]
        assert rest[0] == "lib/utils" and "lib/cli" in rest
        assert sorted(p for p in rest if p.endswith(".js")) == [f"lib/m{i}.js" for i in range(5)]

    def test_the_room_goes_to_the_folder_the_objective_names(self, tmp_path):
        # like pip: a big vendored folder and the package's own code, every path under the
        # project's name: the objective's other words choose the folder to split
        files = {f"proj/_vendor/a/m{i:02d}.py": "x = 1\n" for i in range(30)}
        files |= {f"proj/_vendor/b/m{i:02d}.py": "x = 1\n" for i in range(20)}
        files |= {f"proj/_internal/wheel/w{i}.py": "x = 1\n" for i in range(4)}
        files |= {"proj/_internal/wheel/wheel.py": "x = 1\n", "proj/_internal/x.py": ""}
        files |= {f"proj/_internal/utils/u{i}.py": "x = 1\n" for i in range(9)}
        repo = make_repo(tmp_path / "proj", files)
        plan = plan_for(repo, "How does proj pick a compatible wheel?")
        scopes = sorted(s.scope[0] for s in plan.subtasks)
        assert scopes == [
            "proj/_internal/utils",
            "proj/_internal/wheel",
            "proj/_internal/x.py",
            "proj/_vendor",
        ]

    def test_different_repos_give_different_plans(self, tmp_path):
        objective = "Map the project"
        plans = []
        for name, files in (("billing", BILLING), ("weather", WEATHER)):
            repo = make_repo(tmp_path / name, files)
            plan = plan_for(repo, objective)
            plans.append(sorted(p for s in plan.subtasks for p in s.scope))
            assert all((repo / p).exists() for p in plans[-1])
        assert plans[0] != plans[1]
        assert "weather" in plans[1] and "weather" not in plans[0]

    def test_phase_changes_wording_and_ranking(self, tmp_path):
        repo = make_repo(tmp_path / "billing", BILLING)
        plans = {
            phase: run_agent(
                OfflineChatModel(),
                workdir_tools(repo),
                PhasePlan,
                lead_prompt("Check quality", phase, 2),
            )[0]
            for phase in ("exploration", "review")
        }
        assert plans["review"].subtasks[0].title.startswith("Review")
        assert plans["review"].subtasks[0].id.startswith("review-")
        assert any(s.scope == ["tests"] for s in plans["review"].subtasks)
        assert plans["exploration"].model_dump() != plans["review"].model_dump()

    def test_without_file_tools_plans_directly(self):
        reply = (
            OfflineChatModel()
            .bind_tools([PhasePlan])
            .invoke([HumanMessage("Objective: write a haiku\nPhase: planning")])
        )
        plan = PhasePlan.model_validate(reply.tool_calls[0]["args"])
        assert len(plan.subtasks) == 1 and "write a haiku" in plan.subtasks[0].description

    def test_lenient_parsing_of_markdown_fields(self, tmp_path):
        repo = make_repo(tmp_path / "weather", WEATHER)
        prompt = (
            "Please plan.\n**Objective:** forecast caching\n- Phase: review\n> Max subtasks: 1\n"
        )
        plan, _ = run_agent(OfflineChatModel(), workdir_tools(repo), PhasePlan, prompt)
        assert len(plan.subtasks) == 1 and plan.subtasks[0].id.startswith("review-")
        assert plan.subtasks[0].scope == ["weather"]

    def test_next_phase_in_the_same_conversation_reuses_the_listing(self, tmp_path):
        repo = make_repo(tmp_path / "billing", BILLING)
        tools = workdir_tools(repo)
        bound = OfflineChatModel().bind_tools([*tools, PhasePlan])
        messages = [HumanMessage(lead_prompt("How are invoices taxed?"))]
        for _ in range(2):
            reply = bound.invoke(messages)
            call = reply.tool_calls[0]
            result = tools[0].invoke(call["args"]) if call["name"] == "list_files" else "ok"
            messages += [reply, ToolMessage(result, tool_call_id=call["id"])]
        assert call["name"] == "PhasePlan"
        messages.append(HumanMessage("Phase: planning"))
        reply = bound.invoke(messages)
        assert reply.tool_calls[0]["name"] == "PhasePlan"  # no second listing
        plan = PhasePlan.model_validate(reply.tool_calls[0]["args"])
        assert plan.subtasks[0].id == "planning-src-billing"
        assert "How are invoices taxed" in plan.subtasks[0].description

    def test_plan_ignores_free_text_so_a_resumed_lead_plans_the_same(self, tmp_path):
        repo = make_repo(tmp_path / "billing", BILLING)
        prompt = lead_prompt("How are invoices taxed?", max_subtasks=2)
        seeded = "Snapshot: earlier we looked at docs and docs/usage.md and tests.\n" + prompt
        plans = [
            run_agent(OfflineChatModel(), workdir_tools(repo), PhasePlan, text)[0]
            for text in (prompt, seeded)
        ]
        assert plans[0] == plans[1]

    def test_orchestrator_prompt_format(self, tmp_path):
        """The exact lines the lead node sends (extra lines must not confuse the parser)."""
        repo = make_repo(tmp_path / "billing", BILLING)
        prompt = "\n".join(
            [
                "Objective: Where is tax computed?",
                "Phase: planning",
                "Phase number: 2 of 4 (exploration, planning, implementation, review)",
                "Max subtasks: 2",
                "Agents: planner, researcher",
                "Plan this phase now and call PhasePlan.",
            ]
        )
        plan, _ = run_agent(OfflineChatModel(), workdir_tools(repo), PhasePlan, prompt)
        assert len(plan.subtasks) == 2
        assert all(s.id.startswith("planning-") and s.agent == "planner" for s in plan.subtasks)
        assert plan.subtasks[0].scope == ["src/billing"]  # holds tax.py


def test_a_module_holding_most_of_the_code_gets_several_subagents(tmp_path):
    # a Maven-shaped project: one module holds most of the code beside small ones; with
    # no room left to split, the big module alone would get one subagent reading 3 of
    # its 40 files
    core = "core/src/main/java/com/acme/core"
    files = {f"{core}/internal/Bind{i}.java": "class B {}\n" for i in range(20)}
    files |= {f"{core}/stream/Reader{i}.java": "class R {}\n" for i in range(5)}
    files |= {f"{core}/Api{i}.java": "class A {}\n" for i in range(15)}
    files |= {f"core/src/test/java/com/acme/core/Api{i}Test.java": "class T {}\n" for i in range(8)}
    for small in ("extras", "metrics", "proto"):
        files |= {
            f"{small}/src/main/java/com/acme/{small}/M{i}.java": "class M {}\n" for i in range(3)
        }
    files |= {"README.md": "# Acme\n", "pom.xml": "<project/>\n"}
    repo = make_repo(tmp_path / "acme", files)
    plan = plan_for(repo, "How are records bound?")
    scopes = [s.scope for s in plan.subtasks]
    assert len(scopes) == 4
    assert [f"{core}/internal"] in scopes  # the biggest part of the core apart
    assert any(s[0].startswith(f"{core}/Api") for s in scopes)  # the core's own files
    # the rest of the core module is one more area, not left out
    rest = next(s for s in plan.subtasks if s.title.endswith(")") and "other than" in s.title)
    assert f"{core}/stream" in rest.scope
    # named by the parts' last folders, not their paths again
    assert rest.title == "Survey core/src (other than internal and core's top level)"
    assert "Left out of the exploration phase: " in " ".join(plan.constraints)


def test_example_apps_outnumbering_the_library_are_not_its_core(tmp_path):
    # an express-shaped project: many example apps beside a small `lib/`; the examples
    # hold most of the code but are not cut into several areas at the library's expense
    files = {f"examples/app{i}/index.js": "const x = 1\n" for i in range(30)}
    files |= {f"lib/m{i}.js": "module.exports = 1\n" for i in range(6)}
    files |= {f"test/t{i}.js": "it('x', () => {})\n" for i in range(20)}
    files |= {"index.js": "module.exports = require('./lib/m0')\n", "Readme.md": "# x\n"}
    repo = make_repo(tmp_path / "web", files)
    plan = plan_for(repo, "How is a request routed?")
    assert sorted(s.scope[0] for s in plan.subtasks if len(s.scope) == 1) == [
        "examples",
        "lib",
        "test",
    ]


def test_a_small_core_stays_one_area_beside_its_docs(tmp_path):
    # fd-shaped: all 22 modules in `src/`, beside docs, tests and scripts; one subagent
    # surveys a core this size, and the README and docs keep their places
    files = {f"src/m{i:02d}.rs": "fn f() {}\n" for i in range(18)}
    files |= {f"src/filter/f{i}.rs": "fn g() {}\n" for i in range(4)}
    files |= {f"doc/page{i}.md": "# Page\n" for i in range(4)}
    files |= {f"tests/t{i}.rs": "fn t() {}\n" for i in range(2)}
    files |= {f"scripts/s{i}.sh": "echo\n" for i in range(2)}
    files |= {"README.md": "# fd\n", "Cargo.toml": "[package]\n"}
    repo = make_repo(tmp_path / "fd", files)
    plan = plan_for(repo, "How are hidden files skipped?")
    scopes = [s.scope for s in plan.subtasks]
    assert ["src"] in scopes and ["doc"] in scopes


def test_the_strategy_names_each_word_of_the_objective_once(tmp_path):
    files = {"source/cookies.ts": "export {};\n", "docs/jar.md": "# Cookie jar\n"}
    repo = make_repo(tmp_path / "client", files)
    plan = plan_for(repo, "Where are cookies handled and how does a user plug in a cookie jar?")
    assert "ranked by the objective's words (cookies, user, plug, jar):" in plan.strategy


def test_the_projects_own_name_is_no_word_of_the_objective(tmp_path):
    files = {"lib/route.js": "exports.route = function (path) {};\n", "docs/api.md": "# API\n"}
    repo = make_repo(tmp_path / "express", files)
    plan = plan_for(repo, "How does express match a request path to a route?")
    assert "ranked by the objective's words (match, request, path, route):" in plan.strategy
    # the key questions name the same words, not the objective again
    assert "Which files in lib matter for the objective (match, request, path, route)?" in (
        plan.key_questions
    )


def test_vendored_code_comes_after_the_projects_own(tmp_path):
    # jq-shaped: a vendored library with more C files than any folder of the project's own
    files = {f"vendor/decNumber/dec{i}.c": "int f(void);\n" for i in range(12)}
    files |= {f"src/m{i}.c": "int g(void);\n" for i in range(8)}
    files |= {f"scripts/s{i}.sh": "echo\n" for i in range(3)}
    files |= {f"tests/t{i}.test": "x\n" for i in range(3)}
    files |= {"docs/manual.md": "# Manual\n", "README.md": "# tool\n"}
    repo = make_repo(tmp_path / "tool", files)
    plan = plan_for(repo, "How is a filter expression parsed?")
    scopes = [s.scope[0] for s in plan.subtasks]
    assert len(scopes) == 4 and "vendor/decNumber" not in scopes and "src" in scopes
    plan = plan_for(repo, "How is decNumber used for big numbers?")
    assert "vendor/decNumber" in [s.scope[0] for s in plan.subtasks]  # named: it counts


def test_a_name_from_the_code_places_the_subagents_where_it_occurs(tmp_path):
    # the stdlib's shape: the definition in a loose top-level module past the first ten,
    # its callers in one package among several that never mention it
    files = {f"a{i:02d}.py": "x = 1\n" for i in range(14)}
    files["socket.py"] = "def create_connection(address, timeout=None):\n    pass\n"
    files["ftp/client.py"] = "import socket\nsock = socket.create_connection(host)\n"
    for pkg in ("email", "json", "xml", "zlib"):
        files |= {f"{pkg}/m{i}.py": "y = 2\n" for i in range(6)}
    repo = make_repo(tmp_path / "lib", files)
    model = OfflineChatModel()
    plan, transcript = run_agent(
        model, workdir_tools(repo), PhasePlan, lead_prompt("Where is create_connection called?")
    )
    assert [name for name, _, _ in transcript] == ["list_files", "grep_files", "PhasePlan"]
    assert transcript[1][1]["pattern"] == "create_connection"
    scopes = [path for sub in plan.subtasks for path in sub.scope]
    assert "socket.py" in scopes and any(p.startswith("ftp") for p in scopes)
    assert "ranked by where the names it gives occur (2 matching line(s) in 2 file(s))" in (
        plan.strategy
    )
