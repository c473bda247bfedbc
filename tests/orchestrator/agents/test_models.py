"""Model resolution: spec, env, workflow, provider keys, offline fallback and the safety switch.

`tests/conftest.py` removes provider keys and `TETHER_MODEL` from every test. The
"not installed" cases make the integration package look absent to tether's lookup, so they
hold whether or not it is installed here (langchain-openai is a dev dependency).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from orchestrator.agents.chat_models import (
    OFFLINE_BANNER,
    ResolvedModel,
    allow_model_requests,
    choose_spec,
    model_requests_allowed,
    resolve_model,
)
from orchestrator.errors import ModelConfigError
from orchestrator.offline import OfflineChatModel


@pytest.fixture
def requests_allowed(monkeypatch):
    """Allow real model construction for one test, restoring the previous setting."""
    monkeypatch.delenv("TETHER_ALLOW_MODEL_REQUESTS", raising=False)
    previous = allow_model_requests(True)
    try:
        yield
    finally:
        allow_model_requests(previous)


def _not_installed(monkeypatch, module: str) -> None:
    """Make `module` look absent to tether's package lookup (whatever this machine has)."""
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == module else real(name, *args, **kwargs)

    monkeypatch.setattr("orchestrator.agents.chat_models.importlib.util.find_spec", find_spec)


class TestOffline:
    def test_default_is_offline_without_keys(self):
        resolved = resolve_model()
        assert isinstance(resolved, ResolvedModel)
        assert resolved.offline and resolved.name == "tether:offline"
        assert resolved.source == "default"
        assert isinstance(resolved.model, OfflineChatModel)

    @pytest.mark.parametrize("spec", ["offline", "tether:offline", "OFFLINE", " tether-offline "])
    def test_offline_is_selectable_explicitly(self, spec, monkeypatch):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # explicit choice beats the key
        resolved = resolve_model(spec)
        assert resolved.offline and resolved.source == "--model"

    def test_offline_works_even_when_requests_are_disabled(self, monkeypatch):
        monkeypatch.setenv("TETHER_ALLOW_MODEL_REQUESTS", "0")
        assert resolve_model("offline").model.invoke("hello").content == "hello"

    def test_banner_is_one_honest_line(self):
        assert "\n" not in OFFLINE_BANNER
        for word in ("offline", "deterministic", "no network", "--model", "TETHER_MODEL"):
            assert word in OFFLINE_BANNER


class TestChoice:
    def test_order_spec_env_workflow_key(self, monkeypatch):
        assert choose_spec(None, None) == ("tether:offline", "default")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        assert choose_spec(None, None) == ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY")
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        assert choose_spec(None, None) == ("openai:gpt-4o-mini", "OPENAI_API_KEY")
        assert choose_spec(None, "ollama:llama3.1") == ("ollama:llama3.1", "workflow")
        monkeypatch.setenv("TETHER_MODEL", "offline")
        assert choose_spec(None, "ollama:llama3.1") == ("offline", "TETHER_MODEL")
        assert choose_spec("groq:x", "ollama:llama3.1") == ("groq:x", "--model")

    def test_env_model_is_used(self, monkeypatch):
        monkeypatch.setenv("TETHER_MODEL", "tether:offline")
        assert resolve_model().source == "TETHER_MODEL"


class TestErrors:
    @pytest.mark.parametrize(
        "spec, module, message",
        [
            ("openai:gpt-4o-mini", "langchain_openai",
             "provider 'openai' is not installed for model 'openai:gpt-4o-mini' (from "
             "--model): pip install langchain-openai"),
            ("anthropic:claude-haiku-4-5", "langchain_anthropic",
             "provider 'anthropic' is not installed for model 'anthropic:claude-haiku-4-5' "
             "(from --model): pip install langchain-anthropic"),
            ("gpt-4o-mini", "langchain_openai",
             "provider 'openai' is not installed for model 'gpt-4o-mini' (from --model): "
             "pip install langchain-openai"),
            ("groq:llama-3.1-8b-instant", "langchain_groq",
             "provider 'groq' is not installed for model 'groq:llama-3.1-8b-instant' (from "
             "--model): pip install langchain-groq"),
        ],
    )  # fmt: skip
    def test_missing_provider_package(self, requests_allowed, monkeypatch, spec, module, message):
        _not_installed(monkeypatch, module)
        with pytest.raises(ModelConfigError) as info:
            resolve_model(spec)
        assert str(info.value) == message

    @pytest.mark.parametrize(
        "spec, message",
        [
            ("nonsense:foo", "unknown model provider 'nonsense' in 'nonsense:foo'"),
            ("just-a-name", "cannot tell the provider of model 'just-a-name'"),
            (":foo", "model ':foo' is malformed"),
            ("openai:", "model 'openai:' is malformed"),
        ],
    )
    def test_bad_specs(self, requests_allowed, spec, message):
        with pytest.raises(ModelConfigError) as info:
            resolve_model(spec)
        assert str(info.value).startswith(message)
        assert "\n" not in str(info.value) and "offline" in str(info.value)

    def test_key_set_but_package_missing_names_the_package(self, requests_allowed, monkeypatch):
        _not_installed(monkeypatch, "langchain_openai")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        with pytest.raises(ModelConfigError, match=r"pip install langchain-openai"):
            resolve_model()

    def test_workflow_model_is_validated(self, requests_allowed):
        with pytest.raises(ModelConfigError, match="unknown model provider 'nope'"):
            resolve_model(workflow_model="nope:x")


class TestSwitch:
    def test_switch_refuses_real_models(self, monkeypatch):
        # pretend the provider package is installed, so the switch is what stops the build
        monkeypatch.setattr(
            "orchestrator.agents.chat_models.importlib.util.find_spec", lambda name: True
        )
        previous = allow_model_requests(False)
        try:
            assert not model_requests_allowed()
            with pytest.raises(ModelConfigError) as info:
                resolve_model("openai:gpt-4o-mini")
        finally:
            allow_model_requests(previous)
        assert str(info.value) == (
            "real model calls are disabled (TETHER_ALLOW_MODEL_REQUESTS=0 or "
            "allow_model_requests(False)): cannot use 'openai:gpt-4o-mini'; use --model offline"
        )

    @pytest.mark.parametrize("value, allowed", [("0", False), ("false", False), ("1", True)])
    def test_env_switch(self, monkeypatch, requests_allowed, value, allowed):
        monkeypatch.setenv("TETHER_ALLOW_MODEL_REQUESTS", value)
        assert model_requests_allowed() is allowed

    def test_allow_returns_previous(self):
        previous = allow_model_requests(False)
        try:
            assert allow_model_requests(False) is False
        finally:
            allow_model_requests(previous)


def test_import_does_not_load_langchain():
    """The CLI imports this module at start-up; LangChain must wait until a model is built."""
    code = (
        "import sys, orchestrator.agents.chat_models; "
        "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'openai'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class TestInstalledProvider:
    """The success path, with a stand-in `langchain_openai` module (no network, no key)."""

    @pytest.fixture
    def fake_openai(self, monkeypatch, requests_allowed):
        import importlib.machinery
        import types

        from langchain.chat_models.base import _get_chat_model_creator

        class ChatOpenAI(OfflineChatModel):
            model: str = ""

            def model_post_init(self, context):
                if self.model == "broken":
                    raise RuntimeError("OPENAI_API_KEY is not set\nmore detail")
                super().model_post_init(context)

        module = types.ModuleType("langchain_openai")
        module.__spec__ = importlib.machinery.ModuleSpec("langchain_openai", None)
        module.ChatOpenAI = ChatOpenAI
        monkeypatch.setitem(sys.modules, "langchain_openai", module)
        _get_chat_model_creator.cache_clear()
        yield ChatOpenAI
        _get_chat_model_creator.cache_clear()

    def test_builds_through_init_chat_model(self, fake_openai, monkeypatch):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        resolved = resolve_model()
        assert (resolved.name, resolved.offline, resolved.source) == (
            "openai:gpt-4o-mini",
            False,
            "OPENAI_API_KEY",
        )
        assert type(resolved.model) is fake_openai and resolved.model.model == "gpt-4o-mini"

    def test_provider_errors_become_one_line(self, fake_openai):
        with pytest.raises(ModelConfigError) as info:
            resolve_model("openai:broken")
        assert str(info.value) == (
            "cannot initialise model 'openai:broken': RuntimeError: OPENAI_API_KEY is not set"
        )


def test_tethers_provider_table_covers_langchains():
    """tether checks a provider's package without LangChain's private registry; its own
    table must name every provider `init_chat_model` knows (a new LangChain release that
    adds one fails here, not in a user's run)."""
    from langchain.chat_models.base import _BUILTIN_PROVIDERS

    from orchestrator.agents import chat_models as models

    known = {**models._PROVIDER_MODULES, **models._OTHER_PROVIDERS}
    packages = {p: m.split(".")[0] for p, (m, *_rest) in _BUILTIN_PROVIDERS.items()}
    assert packages == {p: known.get(p, "missing").split(".")[0] for p in _BUILTIN_PROVIDERS}
