"""What the offline subagent says a file defines and where a change would go: change
sites named by the functions holding the objective's words, methods named after their
class, receiver, `impl` block or property (Python, Go, Rust, Java/Kotlin, JavaScript and
TypeScript, also in a read cut short), call chains, and what defines nothing (prose,
build scripts). Each test was written against a repository where the old behaviour
misled: fd, starlette, logrus, express, serde_json, timber."""

from __future__ import annotations

import re

from tests.orchestrator.offline.test_offline import make_repo
from tests.orchestrator.offline.test_offline_search import (
    FINDER,
    change_sites,
    findings_for,
    first_search,
)


def test_change_sites_are_the_functions_holding_the_words(tmp_path):
    repo = make_repo(tmp_path / "finder", FINDER)
    findings, _ = findings_for(repo, ["src"], phase="implementation")
    assert (
        "Change sites in src/walk.rs, where the objective's words are: "
        "build_walker (line 8: 2 matching lines)."
    ) in findings.key_discoveries


def test_definitions_of_go_rust_kotlin_and_java(tmp_path):
    files = {
        "cmd/command.go": (
            "package cmd\n\ntype Command struct {}\n\n"
            "func (c *Command) Execute() error {\n\treturn nil\n}\n\n"
            "func NewCommand() *Command {\n\treturn &Command{}\n}\n"
        ),
        "cmd/walk.rs": (
            "pub(crate) fn scan() {}\npub enum State { Go }\npub trait Filter {}\n"
            "impl Filter for State {}\n"
        ),
        "cmd/App.kt": "data class User(val name: String)\n\nsuspend fun fetch(): User {\n}\n",
        "cmd/Paths.java": (
            "public final class Paths {\n"
            "    private final Map<String, String> cache = new HashMap<>();\n"
            "    public static String join(String a, String b) {\n"
            "        return a + b;\n"
            "    }\n"
            "}\n"
        ),
    }
    files["cmd/client.ts"] = (
        "export type Id = string;\n"
        "export class Client {\n"
        "\tstatic create(input: Input): Client {\n"
        "\t\tsetTimeout(function () {\n"
        "\t\t});\n"
        "\t}\n"
        "\tasync #retry<T>(operation: () => Promise<T>): Promise<T> {\n"
        "\t\tif (this.done) {\n"
        "\t\t}\n"
        "\t}\n"
        "}\n"
    )
    repo = make_repo(tmp_path / "poly", files)
    notes = {}
    pairs = (["cmd/command.go", "cmd/walk.rs"], ["cmd/App.kt", "cmd/Paths.java"], ["cmd/client.ts"])
    for pair in pairs:
        findings, _ = findings_for(repo, pair, objective="What does each file define?")
        notes |= {f.path: f.description for f in findings.files}
    assert notes["cmd/command.go"].endswith(
        "defines Command (line 3); Command.Execute (line 5); NewCommand (line 9)"
    )
    assert notes["cmd/walk.rs"].endswith("defines scan (line 1); State (line 2); Filter (line 3)")
    assert notes["cmd/App.kt"].endswith("defines User (line 1); fetch (line 3)")
    assert notes["cmd/Paths.java"].endswith("defines Paths (line 1); Paths.join (line 3)")
    assert notes["cmd/client.ts"].endswith(
        "defines Id (line 1); Client (line 2); Client.create (line 3); Client.retry (line 7)"
    )


def test_code_in_a_markdown_guide_is_no_change_site(tmp_path):
    files = {
        "docs/guide.md": (
            "# Widgets\n\nHow widgets are flushed:\n\n```go\nfunc main() {\n"
            "    widget.Flush()\n}\n```\n"
        ),
        "docs/flush.go": "package docs\n\nfunc flushWidgets() {\n    widget.Flush()\n}\n",
    }
    repo = make_repo(tmp_path / "w", files)
    findings, _ = findings_for(
        repo, ["docs"], objective="Where are widgets flushed?", phase="implementation"
    )
    sites = [d for d in findings.key_discoveries if d.startswith("Change sites")]
    assert sites == [
        "Change sites in docs/flush.go, where the objective's words are: "
        "flushWidgets (line 3: 2 matching lines)."
    ]


def test_javascript_test_cases_declared_by_calls_are_counted(tmp_path):
    spec = (
        "import test from 'ava';\n"
        "const echo = (request, response) => {\n\tresponse.end(request.url);\n};\n"
        "const echo = (request, response) => {\n\tresponse.end('');\n};\n"
        "test('async hooks', withServer, async t => {\n\tt.pass();\n});\n"
        'test.serial("retries once", async t => {\n\tt.pass();\n});\n'
        "it(`follows a redirect`, () => {});\n"
    )
    repo = make_repo(tmp_path / "got", {"test/hooks.ts": spec, "source/hooks.ts": "export {};\n"})
    findings, _ = findings_for(repo, ["test"], phase="implementation")
    assert (
        "test/hooks.ts targets 'hooks': 3 test case(s) in the lines read; helpers/fixtures: echo."
    ) in findings.key_discoveries


def test_build_scripts_define_no_change_sites(tmp_path):
    gradle = "def check = tasks.create('check')\ncheck.dependsOn(japicmp)\nbaseline('x') {\n}\n"
    repo = make_repo(tmp_path / "lib", {"lib/build.gradle": gradle, "lib/Log.kt": "fun log() {}\n"})
    findings, _ = findings_for(
        repo, ["lib"], "How is the check task built?", phase="implementation"
    )
    assert not any("Change sites in lib/build.gradle" in d for d in findings.key_discoveries)


ROUTING = (
    "class NoMatch(Exception):\n"
    '    """Raised when nothing matches\n'
    "    a route.\n"
    '    """\n'
    "\n"
    "    def __init__(self, name):\n"
    "        super().__init__(name)\n"
    "\n"
    "\n"
    "class Route:\n"
    "    def __init__(\n"
    "        self,\n"
    "        middleware=None,\n"
    "    ):\n"
    "        self.middleware = middleware\n"
    "\n"
    "    def handle(self, request):\n"
    "        def call(app):\n"
    "            return self.middleware(app)\n"
    "        return call\n"
    "\n"
    "\n"
    "class Router:\n"
    '    """Routes requests to endpoints."""\n'
    "\n"
    "    def __init__(self, routes, middleware=None):\n"
    "        self.middleware_stack = middleware\n"
    "\n"
) + "".join(f"def helper_{i}():\n    return {i}\n\n" for i in range(300))  # a read cut short


def test_methods_are_named_after_their_class_also_in_a_read_cut_short(tmp_path):
    repo = make_repo(tmp_path / "web", {"web/routing.py": ROUTING})
    objective = "Where would I add support for route-level middleware?"
    assert first_search(repo, ["web"], objective) == "middlewar|rout"  # not 'support'
    findings, _ = findings_for(repo, ["web"], objective=objective, phase="implementation")
    sites = next(d for d in findings.key_discoveries if d.startswith("Change sites"))
    # two `__init__`s told apart; a function inside a method keeps its own name
    assert sites == (
        "Change sites in web/routing.py, where the objective's words are: "
        "Route.__init__ (line 11: 2 matching lines), Router (line 23: 2 matching lines), "
        "Router.__init__ (line 26: 2 matching lines), NoMatch (line 1: 1 matching line), "
        "Route (line 10: 1 matching line), call (line 18: 1 matching line)."
    )
    note = next(f.description for f in findings.files if f.path == "web/routing.py")
    # the 800 lines read do not parse whole; the definitions above the cut still do
    assert note.startswith("no docstring or heading. 800 lines read; defines NoMatch (line 1: ")
    assert "NoMatch (line 1: Raised when nothing matches); NoMatch.__init__ (line 6)" in note
    assert "Router (line 23: Routes requests to endpoints.)" in note


def test_javascript_functions_given_to_properties_are_definitions(tmp_path):
    app = (
        "var app = exports = module.exports = {};\n"
        "\n"
        "app.handle = function handle(req, res) {\n"
        "  this.router.handle(req, res);  // the router matches the path\n"
        "};\n"
        "\n"
        "Router.prototype.route = (path) => {\n"
        "  return new Route(path);  // a route for the path\n"
        "};\n"
        "\n"
        "exports.compile = function(path) {\n"
        "  return path;\n"
        "};\n"
    )
    repo = make_repo(tmp_path / "web", {"lib/application.js": app})
    objective = "Where is the path of a route compiled?"
    assert change_sites(repo, ["lib"], objective) == (
        "Change sites in lib/application.js, where the objective's words are: "
        "Router.route (line 7: 2 matching lines), compile (line 11: 2 matching lines), "
        "app.handle (line 3: 1 matching line)."
    )


def test_a_call_chain_names_functions_whose_words_begin_with_the_searched_one(tmp_path):
    code = (
        "def iscoroutine_or_partial(f):\n    return f\n\n"
        "def add_route(path):\n    return path\n\n"
        "class Router:\n    def getRoute(self, path):\n        return add_route(path)\n\n"
        "iscoroutine_or_partial(add_route)\n"
    )
    repo = make_repo(tmp_path / "web", {"web/routing.py": code})
    objective = "Where is a route looked up, and how is a route matched?"
    findings, _ = findings_for(repo, ["web"], objective=objective)
    chain = next(d for d in findings.key_discoveries if d.startswith("Call chain"))
    # 'rout' starts a word of add_route and getRoute; in iscoroutine it is inside one
    assert chain.endswith(
        "Defined at web/routing.py:4 add_route, web/routing.py:8 getRoute; "
        "called at web/routing.py:9 add_route."
    )


def test_rust_methods_are_named_after_their_impl_blocks_type(tmp_path):
    number = (
        "pub struct Number { n: f64 }\n\n"
        "impl Number {\n    pub fn is_nan(&self) -> bool {\n        self.n.is_nan()\n    }\n}\n\n"
        "impl<'de> Deserialize<'de> for Number {\n"
        "    fn deserialize(d: D) -> Number {\n        parse_nan(d)\n    }\n"
        "    type Error = NanError;\n}\n\n"
        "fn parse_nan(d: D) -> Number {\n    todo!() // NaN\n}\n"
    )
    repo = make_repo(tmp_path / "json", {"src/number.rs": number})
    sites = change_sites(repo, ["src"], "Where is NaN handled?")
    assert sites.startswith("Change sites in src/number.rs, where the objective's words are: ")
    named = re.findall(r"([\w.]+) \(line (\d+): (\d+) matching", sites)
    # no `Number.Error`: a trait's type; `NanError` holds no word "nan" of its own
    assert [n for n, _, _ in named] == ["Number.is_nan", "parse_nan", "Number.deserialize"]
    lines = number.splitlines()
    for name, line, count in named:
        assert f"fn {name.rpartition('.')[2]}(" in lines[int(line) - 1]
        body = lines[int(line) - 1 : int(line) + 2]
        assert int(count) == sum(bool(re.search(r"(?<![a-z])nan(?![a-z])", b, re.I)) for b in body)
