"""What the offline subagent searches for, what it reads and what its findings say: the
objective's words (names from the code alone, never the words that frame a question), the
files and functions holding them (code before its tests, drawings and lock files last, a
window further down a long file), definitions and test cases in several languages, and
how files describe themselves (READMEs past their banners and titles, not tool directives
or licence headers). Each test was written against a repository where the old behaviour
misled: fd, ky, gson, httpx, got, glow, flask, requests, hexyl, jq, sinatra, viper."""

from __future__ import annotations

import re

from orchestrator.offline import OfflineChatModel
from orchestrator.offline.terms import terms_pattern, whole
from orchestrator.tools.workdir import workdir_tools
from orchestrator.types import PhasePlan, SubmitFindings
from tests.orchestrator.offline.test_offline import make_repo, run_agent, sub_prompt

OBJECTIVE = "How does the finder skip gitignored and hidden files, and how can a user override it?"

# The walker holds the answer but never spells "gitignore"; four other files mention it once
# in passing, which is what a search for the objective's longest word alone would rank first.
FINDER = {
    "src/cli.rs": "// Options of the finder (see the gitignore docs).\npub struct Opts {}\n",
    "src/config.rs": "// Read once; gitignore handling lives elsewhere.\npub struct Config {}\n",
    "src/main.rs": "// The entry point (gitignore aware).\nfn main() {\n    run();\n}\n",
    "src/output.rs": "// Printing. Nothing about gitignore here.\npub fn print() {}\n",
    "src/walk.rs": (
        "// Walking the tree.\n"
        "pub struct Walker {}\n"
        "\n"
        "fn spawn_senders() {\n"
        "    send();\n"
        "}\n"
        "\n"
        "pub fn build_walker(opts: &Opts) -> Walker {\n"
        "    let mut builder = WalkBuilder::new();\n"
        "    builder.hidden(opts.ignore_hidden);\n"
        "    builder.overrides(build_overrides(opts));\n"
        "    builder.build()\n"
        "}\n"
    ),
}


def findings_for(repo, scope, objective=OBJECTIVE, phase="exploration"):
    sub = PhasePlan.model_validate(
        {
            "strategy": "s",
            "subtasks": [{"id": "x", "title": "Look", "description": "d", "scope": scope}],
        }
    ).subtasks[0]
    prompt = sub_prompt(objective, sub, phase=phase)
    return run_agent(OfflineChatModel(), workdir_tools(repo), SubmitFindings, prompt)


def first_search(repo, scope, objective):
    """The pattern of the subagent's first grep: the objective's words it searches for."""
    _, transcript = findings_for(repo, scope, objective=objective)
    return calls(transcript, "grep_files")[0]


def descriptions(repo, scope, objective):
    """What the subagent's findings say of each file: `{path: description}`."""
    findings, _ = findings_for(repo, scope, objective=objective)
    return {f.path: f.description for f in findings.files}


def change_sites(repo, scope, objective):
    """The first "Change sites in ..." line of the subagent's implementation findings."""
    findings, _ = findings_for(repo, scope, objective=objective, phase="implementation")
    return next(d for d in findings.key_discoveries if d.startswith("Change sites"))


def calls(transcript, tool):
    """The arguments the subagent gave `tool`, in order: a grep's patterns, a read's paths."""
    key = "pattern" if tool == "grep_files" else "path"
    return [args[key] for name, args, _ in transcript if name == tool]


def test_the_file_holding_more_of_the_objectives_words_is_read_first(tmp_path):
    repo = make_repo(tmp_path / "finder", FINDER)
    findings, transcript = findings_for(repo, ["src"])
    greps = calls(transcript, "grep_files")
    assert greps[0] == "gitignor|overrid|hidden"  # one search, the three best words
    read = calls(transcript, "read_file")
    assert read[0] == "src/walk.rs"
    # the count is the real number of lines holding any of them
    assert any(
        d.startswith("6 line(s) in 5 file(s) of src match 'gitignor|overrid|hidden'")
        for d in findings.key_discoveries
    )


def test_a_readme_opening_with_badges_is_described_by_its_first_sentence(tmp_path):
    files = {
        "README.md": (
            "# fw\n\n"
            "[![CI](https://ci.example/fw/badge.svg)](https://ci.example/fw)\n"
            "[[Deutsch](https://example.org/fw-de)]\n"
            '<p align="center"><img src="logo.png" alt="fw logo"></p>\n\n'
            "`fw` finds widgets in [large trees](https://example.org/trees).\n"
        ),
        "docs/diagram.svg": '<svg xmlns="http://www.w3.org/2000/svg"><style>.a{x:1}</style>\n',
        "docs/guide.md": "# Guide\n\nHow to find widgets in trees of any size and shape.\n",
    }
    repo = make_repo(tmp_path / "fw", files)
    notes = descriptions(repo, ["README.md"], "What is fw?")
    assert notes["README.md"] == "`fw` finds widgets in large trees"
    findings, transcript = findings_for(repo, ["docs"], objective="What is fw?")
    notes = {f.path: f.description for f in findings.files}
    # a drawing says nothing about the project, and is read after the text
    read = calls(transcript, "read_file")
    assert read == ["docs/guide.md", "docs/diagram.svg"]
    assert (
        notes["docs/guide.md"] == "Guide" and notes["docs/diagram.svg"] == "no docstring or heading"
    )


def test_a_readme_opening_with_a_sponsor_banner_is_described_by_its_tagline(tmp_path):
    banner = (
        '<div align="center">\n\t<img width="360" src="media/logo.svg" alt="Got">\n'
        "\t<p>\n\t\t<sup>\n\t\t\tOur open source work is supported by the community.\n"
        "\t\t</sup>\n\t</p>\n"
        '\t<a href="https://sponsor.example">\n\t\t<div>\n\t\t\t<img src="sponsor.svg">\n'
        "\t\t</div>\n\t\t<b>Fast remote container builds.</b>\n\t</a>\n</div>\n\n"
        "> Human-friendly HTTP request library\n\n"
    )
    unclosed = '<a href="https://example.org">\n<img src="logo.png">\n\nA tool for widgets.\n'
    files = {"readme.md": banner, "docs/intro.md": unclosed, "source/index.ts": "export {};\n"}
    repo = make_repo(tmp_path / "got", files)
    notes = descriptions(repo, ["readme.md"], "What is got?")
    assert notes["readme.md"] == "Human-friendly HTTP request library"
    # a link left open ends with its HTML block, at the blank line
    notes = descriptions(repo, ["docs"], "What is got?")
    assert notes["docs/intro.md"] == "A tool for widgets"


APACHE = (
    "// Copyright 2013-2023 The Widget Authors\n"
    "//\n"
    '// Licensed under the Apache License, Version 2.0 (the "License");\n'
    "// you may not use this file except in compliance with the License.\n"
    "\n"
)


def test_a_licence_header_is_not_a_files_description(tmp_path):
    files = {
        "w/command.go": APACHE + "// Package w runs widget commands.\npackage w\n\nfunc Run() {}\n",
        "w/args.go": APACHE + "package w\n\nfunc NoArgs() {}\n",
        "w/lib.rs": "//! Widget parsing for the command line.\n\npub fn parse() {}\n",
    }
    repo = make_repo(tmp_path / "w", files)
    findings, _ = findings_for(repo, ["w"], objective="What is in w?")
    notes = {f.path: f.description for f in findings.files}
    assert notes["w/command.go"].startswith("Package w runs widget commands.")
    assert notes["w/args.go"].startswith("no docstring or heading")
    assert notes["w/lib.rs"].startswith("Widget parsing for the command line.")
    assert "Copyright" not in str(findings.model_dump())


def test_a_word_the_objective_says_twice_is_searched_first(tmp_path):
    # "retry" names a file, which alone would put it after every other word; said twice,
    # it is the question's subject
    files = {
        "src/retry.ts": "export const retry = {limit: 2, statusCodes: [408, 413]};\n",
        "src/client.ts": "// Requests fail with a status; hooks trigger.\nexport class C {}\n",
    }
    repo = make_repo(tmp_path / "ky", files)
    objective = "How does ky retry failed requests, and which status codes trigger a retry?"
    assert first_search(repo, ["src"], objective) == "retry|request|trigger"


def test_java_tests_named_after_their_class_are_related(tmp_path):
    files = {
        "lib/src/main/java/p/Parser.java": "public class Parser {\n}\n",
        "lib/src/main/java/p/Lexer.java": "public class Lexer {\n}\n",
        "lib/src/test/java/p/ParserTest.java": "public class ParserTest {\n}\n",
    }
    repo = make_repo(tmp_path / "j", files)
    scope = ["lib/src/main/java/p/Parser.java", "lib/src/main/java/p/Lexer.java"]
    findings, _ = findings_for(repo, scope, objective="What does p hold?", phase="review")
    gap = next(d for d in findings.key_discoveries if d.startswith("No test file is named"))
    assert gap.endswith("(1 related test file(s) listed): lib/src/main/java/p/Lexer.java.")


def test_a_file_named_by_a_minor_word_does_not_outrank_the_files_holding_the_searched_ones(
    tmp_path,
):
    """ "limit" is the objective's fourth word: `resource-limits.md` is named by it but holds
    none of the three searched words; the guide that explains redirects is read first."""
    docs = {
        "docs/resource-limits.md": "# Resource limits\n\nSize the connection pool.\n",
        "docs/guide.md": (
            "# Guide\n\nClients follow a redirect when `follow_redirects=True`.\n"
            "Disable it per request.\n"
        ),
        "docs/api.md": "# API\n\n`is_redirect` tells whether a response redirects.\n",
        "docs/proxies.md": "# Proxies\n\nSet a proxy; disable it with `trust_env=False`.\n",
    }
    repo = make_repo(tmp_path / "client", docs)
    objective = (
        "How does the client decide to follow a redirect, and where can a user limit or disable it?"
    )
    findings, transcript = findings_for(repo, ["docs"], objective=objective)
    greps = calls(transcript, "grep_files")
    assert greps[0] == "redirect|follow|disabl"
    # the line quoted is the one holding most of the words, not the first file's
    assert (
        "4 line(s) in 3 file(s) of docs match 'redirect|follow|disabl', e.g. docs/guide.md:3: "
        "Clients follow a redirect when `follow_redirects=True`."
    ) in findings.key_discoveries
    read = calls(transcript, "read_file")
    assert read[0] == "docs/guide.md"
    assert "docs/resource-limits.md" not in read  # three reads: the files holding the words


def test_a_versioned_name_is_searched_as_code_spells_it(tmp_path):
    files = {
        "source/options.ts": "import http2wrapper from 'http2-wrapper';\nconst http = 1;\n",
        "source/agent.ts": "import http from 'node:http';\nimport https from 'node:https';\n",
    }
    repo = make_repo(tmp_path / "client", files)
    _, transcript = findings_for(repo, ["source"], objective="How is HTTP/2 enabled?")
    greps = calls(transcript, "grep_files")
    assert greps[0] == "http2|enabl"  # not `http`, which every request module holds
    read = calls(transcript, "read_file")
    assert read[0] == "source/options.ts"


def test_tool_directives_are_not_a_files_description(tmp_path):
    files = {
        "ui/ignore_darwin.go": (
            "//go:build darwin\n// +build darwin\n\npackage ui\n\nfunc ignorePatterns() {}\n"
        ),
        "ui/options.ts": "/* eslint-disable no-console */\n// Parses the options.\nexport {};\n",
        "ui/arena.rs": "// Region-based allocation of the views.\nfn x() {}\n",
    }
    repo = make_repo(tmp_path / "glow", files)
    notes = descriptions(repo, ["ui"], "How are ignore patterns chosen?")
    assert notes["ui/ignore_darwin.go"].startswith("no docstring or heading")
    assert notes["ui/options.ts"].startswith("Parses the options")
    assert notes["ui/arena.rs"].startswith("Region-based allocation of the views")


def test_an_acronym_is_searched_and_import_lines_are_quoted_last(tmp_path):
    files = {
        "src/app.py": (
            "from werkzeug.urls import url_converter, function_map\n"
            "def add_url_rule(rule, view_func):\n"
            "    # match the URL rule to its view function\n"
            "    url_map.add(Rule(rule, endpoint=view_func))\n"
        ),
        "src/config.py": "ROOT = '/'\n",
    }
    repo = make_repo(tmp_path / "web", files)
    objective = "How is a URL matched to a view function, and where are URL converters added?"
    findings, transcript = findings_for(repo, ["src"], objective=objective)
    greps = calls(transcript, "grep_files")
    # URL, said twice, is the subject; a short word, searched as a word of its own
    assert greps[0] == terms_pattern([whole("url"), "converter", "function"])
    example = next(d for d in findings.key_discoveries if " match 'url|" in d)
    assert " match 'url|converter|function' (url as a word), " in example
    assert example.endswith("e.g. src/app.py:3: # match the URL rule to its view function")


def test_directives_and_template_tags_of_text_files_are_not_descriptions(tmp_path):
    files = {
        "docs/views.rst": ".. currentmodule:: flask\n\nClass-based Views\n=================\n",
        "docs/base.html": (
            "<!doctype html>\n<title>{% block title %}{% endblock %} - Flaskr</title>\n"
        ),
    }
    repo = make_repo(tmp_path / "site", files)
    notes = descriptions(repo, ["docs"], "What do the docs say about views?")
    assert notes["docs/views.rst"] == "Class-based Views"
    assert notes["docs/base.html"] == "Flaskr"


def test_function_words_of_a_question_are_not_searched(tmp_path):
    files = {"src/adapters.py": "def cert_verify(conn, verify, cert):\n    pass\n"}
    repo = make_repo(tmp_path / "client", files)
    objective = "Where is verify called or defined? Are certificates passed the same way?"
    assert first_search(repo, ["src"], objective) == "certificat|verify"


def test_rust_module_lines_are_quoted_last_and_a_man_page_by_its_name_line(tmp_path):
    files = {
        "src/lib.rs": (
            "pub(crate) mod byte_colors;\n"
            "use crate::colors::{COLOR_NULL, COLOR_ASCII};\n"
            "fn byte_color(byte: u8) -> Color {\n"
            "    // the color of each byte category\n"
            "}\n"
        ),
        "doc/hexyl.1.md": "% HEXYL(1) hexyl\n\n# NAME\n\nhexyl - a command-line hex viewer\n",
    }
    repo = make_repo(tmp_path / "hexyl", files)
    findings, _ = findings_for(repo, ["src"], objective="How is the color of each byte chosen?")
    example = next(d for d in findings.key_discoveries if " match 'color|byte'" in d)
    assert example.endswith("e.g. src/lib.rs:3: fn byte_color(byte: u8) -> Color {")
    notes = descriptions(repo, ["doc"], "What is hexyl?")
    assert notes["doc/hexyl.1.md"] == "hexyl - a command-line hex viewer"


def test_a_long_scope_of_one_folders_files_is_named_by_the_folder_once(tmp_path):
    folder = "gson/src/main/java/com/google/gson"
    names = ["Gson.java", "GsonBuilder.java", "JsonArray.java", "JsonElement.java", "JsonNull.java"]
    repo = make_repo(tmp_path / "gson", {f"{folder}/{n}": "class X {}\n" for n in names})
    findings, _ = findings_for(repo, [f"{folder}/{n}" for n in names], objective="What is Gson?")
    where = f"{folder}/{{Gson.java, GsonBuilder.java, JsonArray.java and 2 more}}"
    assert findings.summary.startswith(f"{where}: ")


def test_a_drawing_or_a_lock_file_matching_the_words_is_read_after_the_texts(tmp_path):
    logo = '<svg><path fill="url(#a)"/><path fill="url(#b)"/><text>url converter</text></svg>\n'
    files = {
        "docs/logo.svg": logo,
        "docs/Cargo.lock": '[[package]]\nname = "url"\n[[package]]\nname = "url-converter"\n',
        "docs/routing.md": "# Routing\n\nEach URL rule maps to a view.\n",
        "docs/intro.md": "# Intro\n\nWhat the framework is, and who it is for.\n",
    }
    repo = make_repo(tmp_path / "web", files)
    objective = "How is a URL matched, and where are URL converters added?"
    _, transcript = findings_for(repo, ["docs"], objective=objective)
    read = calls(transcript, "read_file")
    assert read[0] == "docs/routing.md"
    assert read.index("docs/logo.svg") > read.index("docs/intro.md")
    assert "docs/Cargo.lock" not in read[:2]  # a lock file's package names match words too


def test_who_asks_is_not_searched_but_a_subject_named_user_is(tmp_path):
    files = {
        "src/colors.rs": "pub fn color_of(byte: u8) {}\n",
        "CONTRIBUTING.md": "# Contributing\n\nThank the user who reported it (@user).\n",
    }
    repo = make_repo(tmp_path / "viewer", files)
    asked = "How are colors picked for each byte, and how can a user turn colors off?"
    assert "user" not in first_search(repo, ["src", "CONTRIBUTING.md"], asked).split("|")
    assert "user" in first_search(repo, ["src"], "How are users authenticated?").split("|")


def test_a_readme_is_described_by_what_follows_its_title(tmp_path):
    files = {
        "a/README.md": "# widgets\n\n**widgets** is a [fast][1] tool for trees.\n\n[1]: https://x\n",
        "b/README.rst": "Sprockets\n=========\n\nFinds sprockets in trees.\n",
        "c/README.md": "# gears\n\n## Install\n\npip install gears\n",
    }
    repo = make_repo(tmp_path / "mono", files)
    notes = descriptions(repo, ["a/README.md", "b/README.rst", "c/README.md"], "What is here?")
    assert notes["a/README.md"] == "widgets is a fast tool for trees"
    assert notes["b/README.rst"] == "Sprockets: Finds sprockets in trees"
    assert notes["c/README.md"] == "gears"  # straight into its sections: the title alone


def test_code_in_an_unlisted_language_or_a_script_is_described_by_its_comments_only(tmp_path):
    files = {
        "src/builtin.jq": "def halt_error: halt_error(5);\ndef todate: strftime(1);\n",
        "src/lexer.l": "/* The lexer of filters. */\n%{\n#include <x.h>\n%}\n",
        "scripts/version": "#!/bin/sh\nset -e\necho 1.0\n",
        "scripts/build": "#!/bin/sh\n# Builds the release archives.\nmake dist\n",
        "docs/manual.yml": "headline: The Manual\nbody: text\n",
    }
    repo = make_repo(tmp_path / "jq", files)
    notes = descriptions(repo, ["src/builtin.jq", "src/lexer.l"], "What is in the tool?")
    notes |= descriptions(repo, ["scripts/version", "scripts/build"], "What is in the tool?")
    notes |= descriptions(repo, ["docs/manual.yml"], "What is in the tool?")
    assert notes["src/builtin.jq"].startswith("no docstring or heading")  # not its first def
    assert notes["src/lexer.l"].startswith("The lexer of filters")
    assert notes["scripts/version"].startswith("no docstring or heading")  # not `set -e`
    assert notes["scripts/build"].startswith("Builds the release archives")
    assert notes["docs/manual.yml"].startswith("headline: The Manual")


def test_ruby_specs_magic_comments_and_wrapped_readme_sentences(tmp_path):
    files = {
        "README.md": (
            "# web\n\nweb is a DSL for\nquickly creating web applications\nin Ruby. It is small.\n"
        ),
        "lib/web/base.rb": (
            "# frozen_string_literal: true\n\n# Routes requests to blocks.\nmodule Web\nend\n"
        ),
        "test/routing_test.rb": (
            "require_relative 'test_helper'\n\nclass RoutingTest < Minitest::Test\n"
            "  it \"matches a plain route\" do\n  end\n\n  it 'extracts params' do\n  end\nend\n"
        ),
    }
    repo = make_repo(tmp_path / "web", files)
    notes = descriptions(repo, ["README.md", "lib/web/base.rb"], "What is web?")
    assert notes["README.md"] == "web is a DSL for quickly creating web applications in Ruby"
    assert notes["lib/web/base.rb"].startswith("Routes requests to blocks")
    findings, _ = findings_for(repo, ["test"], phase="implementation")
    assert any("2 test case(s) in the lines read" in d for d in findings.key_discoveries)


def test_words_found_past_the_lines_read_are_read_where_they_are(tmp_path):
    filler = "".join(f"def helper_{i}():\n    return {i}\n\n" for i in range(300))  # 900 lines
    body = (
        filler
        + "def process_route(pattern, block):\n"
        + "    match = pattern.match(path)  # the route's params\n"
        + "    return block(match)\n"
    )
    repo = make_repo(tmp_path / "web", {"lib/base.py": body, "lib/util.py": "X = 1\n"})
    objective = "How does the framework match a route and extract its params?"
    findings, transcript = findings_for(repo, ["lib"], objective=objective, phase="implementation")
    reads = [args for name, args, _ in transcript if name == "read_file"]
    assert reads[0] == {"path": "lib/base.py", "max_lines": 800}
    assert reads[1]["path"] == "lib/base.py" and 801 <= reads[1]["start_line"] <= 901
    sites = next(d for d in findings.key_discoveries if d.startswith("Change sites in lib/base.py"))
    assert "process_route (line 901: 2 matching lines)" in sites
    note = next(f.description for f in findings.files if f.path == "lib/base.py")
    read_count = int(re.search(r"(\d+) lines read", note).group(1))
    assert 800 < read_count < 903  # the lines read, not the span they cover


def test_no_window_when_most_of_the_words_were_in_the_lines_read(tmp_path):
    head = "def process_route(pattern):\n    match = pattern.match(path)  # route params\n\n"
    filler = "".join(f"def helper_{i}():\n    return {i}\n\n" for i in range(300))
    tail = "def other_route(pattern):\n    return pattern.match(path)\n"
    repo = make_repo(tmp_path / "web", {"lib/base.py": head + filler + tail})
    objective = "How does the framework match a route and extract its params?"
    _, transcript = findings_for(repo, ["lib"], objective=objective, phase="implementation")
    reads = calls(transcript, "read_file")
    assert reads == ["lib/base.py"]  # one read: the words are mostly in its first lines


def test_code_is_read_before_the_tests_beside_it_and_which_wins_is_not_searched(tmp_path):
    files = {
        "viper.go": "package viper\n\n// find returns a value: from a flag, else the config.\n",
        "viper_test.go": "package viper\n\n// where a flag and the config meet\n",
        "windows.go": "package viper\n\n// paths on windows\n",
    }
    repo = make_repo(tmp_path / "cfg", files)
    scope = ["viper.go", "viper_test.go", "windows.go"]
    assert first_search(repo, scope, "Which flag wins, env or config?") == "config|flag"
    findings, transcript = findings_for(repo, scope, "Where do the flag, env and config meet?")
    assert calls(transcript, "read_file")[:2] == ["viper.go", "viper_test.go"]
    quoted = next(d for d in findings.key_discoveries if " match 'config|flag|meet'" in d)
    assert "e.g. viper.go:3: " in quoted  # the code's line, not its test's


def test_a_name_from_the_code_is_searched_alone_and_words_only_where_it_is_absent(tmp_path):
    sessions = (
        "class Session:\n"
        '    """A session: it keeps settings."""\n'
        "\n"
        "    def request(self, method, url):\n"
        '        """:param url: the URL, or an\n'
        '            object to send (merge_environment_settings reads it)."""\n'
        "        settings = self.merge_environment_settings(url)\n"
        "        return settings\n"
        "\n"
        "    def merge_environment_settings(self, url):\n"
        "        return {}\n"
    )
    files = {"src/sessions.py": sessions, "README.md": "# client\n\nKeeps a session's settings.\n"}
    repo = make_repo(tmp_path / "client", files)
    asked = "What would break if we removed Session.merge_environment_settings?"
    findings, transcript = findings_for(repo, ["src"], asked, phase="implementation")
    assert calls(transcript, "grep_files")[0] == "merge_environment_settings"
    sites = next(d for d in findings.key_discoveries if d.startswith("Change sites"))
    assert "request (line 4: 2 matching lines)" in sites and " to (" not in sites
    # no such name in the README: its words are searched instead
    _, transcript = findings_for(repo, ["README.md"], asked)
    assert calls(transcript, "grep_files")[:2] == ["merge_environment_settings", "session|remov"]


def test_a_short_word_keeps_its_final_e(tmp_path):
    files = {"src/tree.kt": "class Tree { fun log() {} }\n", "src/street.kt": "val street = 1\n"}
    repo = make_repo(tmp_path / "timber", files)
    assert first_search(repo, ["src"], "How does a tree log its messages?") == "messag|tree"


def test_a_scope_of_files_is_searched_for_the_words_of_their_names(tmp_path):
    files = {
        "web/routing.py": "def route(request):\n    return match(request)\n",
        "web/app.py": "def serve(request):\n    return route(request)\n",
    }
    repo = make_repo(tmp_path / "web", files)
    objective = "How does a request get routed to its endpoint?"
    # 'rout' is in a file's name, not the scope's folder: it does not match everywhere
    scope = ["web/routing.py", "web/app.py"]
    assert first_search(repo, scope, objective) == "endpoint|request|rout"


def test_a_word_said_in_two_forms_is_one_search_and_a_level_is_a_word(tmp_path):
    files = {
        "hooks.go": "func (hooks LevelHooks) Fire(level Level, entry *Entry) error {\n}\n",
        "entry.go": "func (entry *Entry) log(level Level) {\n\tentry.fireHooks()\n}\n",
    }
    repo = make_repo(tmp_path / "logrus", files)
    objective = (
        "How do hooks get fired when an entry is logged, and how would I add a hook that "
        "drops entries below a level?"
    )
    # `entry` and `entries` are one word said twice, found by `entr`; `below` frames
    assert first_search(repo, ["."], objective) == "entr|hook|level"


def test_the_marks_of_an_area_name_are_not_searched(tmp_path):
    repo = make_repo(tmp_path / "app", {"lib/log.py": "LEVEL = 'info'\n", "lib/top.py": "X = 1\n"})
    sub = PhasePlan.model_validate(
        {
            "strategy": "s",
            "subtasks": [
                {"id": "x", "title": "Survey lib (top level)", "description": "d", "scope": ["lib"]}
            ],
        }
    ).subtasks[0]
    prompt = sub_prompt("Where is the logging level set?", sub)
    _, transcript = run_agent(OfflineChatModel(), workdir_tools(repo), SubmitFindings, prompt)
    assert calls(transcript, "grep_files")[0] == "level|log"  # not `top`: the lead's mark


def test_a_search_cut_at_its_cap_still_reads_the_file_holding_most_matches_first(tmp_path):
    files = {
        # click-shaped: the module holding most lines, none of them with the rarest word
        "lib/core.py": "".join(f"option_{i} = parse({i})\n" for i in range(300)),
        "lib/term.py": "# multiple options of the prompt\ndef prompt(text):\n    return text\n",
        "lib/pager.py": "# multiple options of the pager\ndef page(text):\n    return text\n",
    }
    repo = make_repo(tmp_path / "cli", files)
    objective = "How are options with multiple values parsed?"
    findings, transcript = findings_for(repo, ["lib"], objective=objective)
    # the search counted 302 lines, more than its cap of 100: it showed a few of core.py's
    assert any(d.startswith("302 line(s) in 3 file(s) of lib") for d in findings.key_discoveries)
    assert calls(transcript, "read_file")[0] == "lib/core.py"


def test_the_projects_own_name_is_no_name_from_the_code(tmp_path):
    files = {
        "src/number.rs": "pub fn parse_number(s: &str) -> f64 { s.parse().unwrap() }\n",
        "src/lib.rs": "//! serde_json: JSON for serde_json users\npub mod number;\n",
    }
    repo = make_repo(tmp_path / "serde_json", files)
    objective = "How does serde_json parse a number, and where would I add parsing NaN?"
    # `serde_json` names the workdir and every file; `NaN` is a word, like an acronym
    assert first_search(repo, ["src"], objective) == terms_pattern(["pars", whole("nan"), "number"])
