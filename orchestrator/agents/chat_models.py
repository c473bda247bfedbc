"""Which chat model a run uses: the one place a model string becomes a model object.

Agents receive a `BaseChatModel` and never care where it came from (STYLE 11). Which model
string a run uses is a setting like any other (`orchestrator.config.settings.choose_model`: the
flag or argument, the task's recorded model, `$TETHER_MODEL`, the workflow file's `model`,
the default small model of the first provider whose API key is set, else the built-in
offline model `orchestrator.offline.OfflineChatModel`); this module builds it.

A spec is `provider:model` (or a bare model name LangChain can infer a provider from) and
is built with LangChain's own `init_chat_model`; `offline` or `tether:offline` picks the
offline model explicitly. A provider whose integration package is missing is reported as a
one-line `ModelConfigError` naming where the model name came from (`--model`,
`TETHER_MODEL`, the workflow file, an agent of it) and the pip command that installs the
provider, before anything is imported.

Tests call `allow_model_requests(False)` (or set `TETHER_ALLOW_MODEL_REQUESTS=0`): then
every non-offline model refuses to be built, so no test can reach the network by accident
(like pydantic-ai's `ALLOW_MODEL_REQUESTS`).

Invariant: importing this module imports no LangChain code; provider packages are only
imported when their model is actually built.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.config.settings import DEFAULT_MODEL_TIMEOUT as DEFAULT_TIMEOUT
from orchestrator.config.settings import ENV_MODEL as ENV_MODEL
from orchestrator.config.settings import OFFLINE_NAME as OFFLINE_NAME
from orchestrator.config.settings import PROVIDER_DEFAULTS as PROVIDER_DEFAULTS
from orchestrator.config.settings import choose_model, model_origin
from orchestrator.config.settings import model_timeout as _model_timeout
from orchestrator.errors import ModelConfigError

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from orchestrator.config.workflow import Workflow

#: Providers whose LangChain class takes `timeout` and `max_retries`: tether sets the
#: request timeout and turns the client's own retries off (tether's agents retry, with
#: backoff that honours Retry-After, and count every attempt).
_TIMEOUT_PROVIDERS = frozenset({"openai", "azure_openai", "anthropic", "groq", "mistralai"})
ENV_ALLOW = "TETHER_ALLOW_MODEL_REQUESTS"
OFFLINE_SPECS = frozenset({"offline", "tether:offline", "tether-offline"})
OFFLINE_BANNER = (
    "Using tether's built-in offline model (deterministic, extractive, no network); "
    "set --model provider:name or TETHER_MODEL for a real model."
)

#: Integration module per common provider, for the "not installed" check without
#: importing LangChain; others are looked up in LangChain's provider registry.
_PROVIDER_MODULES = {
    "openai": "langchain_openai",
    "azure_openai": "langchain_openai",
    "anthropic": "langchain_anthropic",
    "ollama": "langchain_ollama",
    "google_genai": "langchain_google_genai",
    "google_vertexai": "langchain_google_vertexai",
    "mistralai": "langchain_mistralai",
    "groq": "langchain_groq",
}

#: The other providers LangChain's `init_chat_model` knows, with their integration module
#: (checked, not imported, before a model is built).
_OTHER_PROVIDERS = {
    "anthropic_bedrock": "langchain_aws",
    "azure_ai": "langchain_azure_ai",
    "baseten": "langchain_baseten",
    "bedrock": "langchain_aws",
    "bedrock_converse": "langchain_aws",
    "bedrock_mantle_anthropic": "langchain_aws",
    "bedrock_mantle_openai": "langchain_aws",
    "cohere": "langchain_cohere",
    "deepseek": "langchain_deepseek",
    "fireworks": "langchain_fireworks",
    "google_anthropic_vertex": "langchain_google_vertexai",
    "huggingface": "langchain_huggingface",
    "ibm": "langchain_ibm",
    "langsmith": "langchain_openai",
    "litellm": "langchain_litellm",
    "meta": "langchain_meta",
    "nvidia": "langchain_nvidia_ai_endpoints",
    "openrouter": "langchain_openrouter",
    "perplexity": "langchain_perplexity",
    "together": "langchain_together",
    "upstage": "langchain_upstage",
    "xai": "langchain_xai",
}

CONTEXT_RATIO = 0.75
"""Share of the model's context window (its LangChain profile's `max_input_tokens`) at
which a context is snapshotted, when that is below the configured threshold."""

_allow_requests = True


@dataclass(frozen=True)
class ResolvedModel:
    """A chat model ready for `bind_tools`, with how it was chosen."""

    model: BaseChatModel
    """The model object agents call."""
    name: str
    """The model string, e.g. `openai:gpt-4o-mini` or `tether:offline`."""
    offline: bool
    """True for tether's built-in offline model (show `OFFLINE_BANNER`)."""
    source: str = "default"
    """Where the choice came from: `--model`, `TETHER_MODEL`, `workflow`, an API key
    variable name, or `default`."""


def allow_model_requests(flag: bool = True) -> bool:
    """Allow or refuse building real (networked) models; returns the previous setting."""
    global _allow_requests
    previous, _allow_requests = _allow_requests, bool(flag)
    return previous


def model_requests_allowed() -> bool:
    """False after `allow_model_requests(False)` or with `TETHER_ALLOW_MODEL_REQUESTS=0`."""
    env = os.environ.get(ENV_ALLOW, "").strip().lower()
    return _allow_requests and env not in ("0", "false", "no", "off")


def offline_model(policy: Any = None) -> BaseChatModel:
    """tether's offline model (default policy: `ResearchPolicy`)."""
    from orchestrator.offline import OfflineChatModel  # LangChain: only when it is built

    return OfflineChatModel(policy=policy)


def choose_spec(spec: str | None = None, workflow_model: str | None = None) -> tuple[str, str]:
    """The model string to use and where it came from (`config.settings.choose_model`)."""
    return choose_model(spec, workflow_model)


def model_timeout(timeout: float | None = None, workflow_timeout: float | None = None) -> float:
    """Seconds per request (`orchestrator.config.settings.model_timeout`).

    Raises:
        ModelConfigError: a value that is not a positive number.
    """
    return _model_timeout(timeout, workflow_timeout)


def resolve_model(
    spec: str | None = None,
    *,
    workflow_model: str | None = None,
    timeout: float | None = None,
) -> ResolvedModel:
    """Build the chat model for a run.

    Args:
        spec: `provider:model` from `--model`, or `offline`; None to look further.
        workflow_model: the workflow file's `model` (used after `$TETHER_MODEL`).
        timeout: seconds per request (default: `model_timeout()`).

    Raises:
        ModelConfigError: unknown provider, provider package not installed, model requests
            disabled, or the provider refused its configuration (e.g. no API key).
    """
    chosen, source = choose_spec(spec, workflow_model)
    return run_model(chosen, source, timeout or model_timeout())


def run_model(
    spec: str | BaseChatModel | None,
    source: str,
    timeout: float,
    *,
    workflow_file: str | os.PathLike[str] | None = None,
    origin: str | None = None,
) -> ResolvedModel:
    """The lead's model for a run: `spec` from `orchestrator.config.settings.Settings` (`model`,
    `sources["model"]`, `model_timeout`), or a chat model object given by an API caller
    (used as is, e.g. a scripted offline model).

    Args:
        workflow_file: the workflow file, named when the model came from its `model:`.
        origin: where the name came from, as an error says it (default: from `source`,
            `orchestrator.config.settings.model_origin`).

    Raises:
        ModelConfigError: as `resolve_model`.
    """
    if not isinstance(spec, str):
        # by its module, so a real model object never imports the offline model's code
        offline = type(spec).__module__.startswith("orchestrator.offline")
        return ResolvedModel(spec, type(spec).__name__, offline, "api")
    if spec.lower() in OFFLINE_SPECS:
        return ResolvedModel(offline_model(), OFFLINE_NAME, True, source)
    where = origin if origin is not None else model_origin(source, workflow_file)
    return ResolvedModel(_build(spec, timeout, where), spec, False, source)


def agent_models(workflow: Workflow) -> dict[str, BaseChatModel]:
    """Chat models of the workflow agents that name their own model.

    Raises:
        ModelConfigError: as `resolve_model` (an uninstalled provider, before any write),
            naming the agent and the workflow file.
    """
    where = f" in {str(workflow.source)}" if workflow.source is not None else ""
    return {
        name: run_model(spec.model, "agent", model_timeout(), origin=f"agent {name!r}{where}").model
        for name, spec in workflow.agents.items()
        if spec.model
    }


class AgentModels:
    """`agent_models` of a workflow, once per workflow content: keyed by the workflow file
    and each agent's model string (never by `id(workflow)`, which Python reuses)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[object, ...], dict[str, BaseChatModel]] = {}

    def __call__(self, workflow: Workflow) -> dict[str, BaseChatModel]:
        key = (
            str(workflow.source),
            tuple(sorted((name, spec.model) for name, spec in workflow.agents.items())),
        )
        if key not in self._cache:
            self._cache[key] = agent_models(workflow)
        return self._cache[key]


def effective_threshold(configured: int, model: object, ratio: float = CONTEXT_RATIO) -> int:
    """min(configured, `ratio` x the model's `max_input_tokens`)."""
    window = context_window(model) if model is not None else None
    return min(configured, int(window * ratio)) if window else configured


def install_hint(provider: str, module: str | None = None) -> str:
    """The pip command that installs `provider`'s LangChain integration.

    It names the integration package itself rather than a tether extra, so the hint works
    however tether was installed (the extras in pyproject.toml pull in the same packages).
    """
    package = (module or f"langchain_{provider}").split(".")[0].replace("_", "-")
    return f"pip install {package}"


def _split_spec(spec: str) -> tuple[str | None, str]:
    """`(provider, model)`; provider None when only a bare model name is given."""
    head, sep, rest = spec.partition(":")
    if sep and head and rest:
        return head.strip().replace("-", "_").lower(), rest.strip()
    if sep:
        raise ModelConfigError(
            f"model {spec!r} is malformed: use provider:model, e.g. "
            "'openai:gpt-4o-mini', or 'offline'"
        )
    return None, spec


#: Model-name prefixes that say their provider (a bare name such as `gpt-4o-mini`), as
#: LangChain's `init_chat_model` infers them.
_NAME_PREFIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("gpt-", "o1", "o3", "o4", "chatgpt", "text-davinci"), "openai"),
    (("claude",), "anthropic"),
    (("command",), "cohere"),
    (("accounts/fireworks",), "fireworks"),
    (("gemini",), "google_vertexai"),
    (("amazon.", "anthropic.", "meta."), "bedrock"),
    (("mistral", "mixtral"), "mistralai"),
    (("deepseek",), "deepseek"),
    (("grok",), "xai"),
    (("sonar",), "perplexity"),
    (("solar",), "upstage"),
)


def _infer_provider(name: str) -> str | None:
    lower = name.lower()
    return next((p for prefixes, p in _NAME_PREFIXES if lower.startswith(prefixes)), None)


def _build(spec: str, timeout: float = DEFAULT_TIMEOUT, origin: str = "") -> BaseChatModel:
    """The chat model of `spec` (`origin`: where the name came from, for the errors)."""
    provider, name = _split_spec(spec)
    if provider is None:
        provider = _infer_provider(name)
        if provider is None:
            raise ModelConfigError(
                f"cannot tell the provider of model {spec!r}: use provider:model, e.g. "
                "'openai:gpt-4o-mini' or 'ollama:llama3.1', or 'offline'"
            )
    module = _PROVIDER_MODULES.get(provider) or _OTHER_PROVIDERS.get(provider)
    if module is None:
        raise ModelConfigError(
            f"unknown model provider {provider!r} in {spec!r}: use a LangChain provider "
            "such as openai, anthropic, ollama, google_genai, mistralai, groq, or 'offline'"
        )
    if importlib.util.find_spec(module.split(".")[0]) is None:
        raise ModelConfigError(
            _not_installed(spec, origin, provider, install_hint(provider, module))
        )
    # Checked after the spec is validated, so a typo is still reported as a typo.
    if not model_requests_allowed():
        raise ModelConfigError(
            f"real model calls are disabled ({ENV_ALLOW}=0 or allow_model_requests(False)): "
            f"cannot use {spec!r}; use --model offline"
        )
    from langchain.chat_models import init_chat_model

    extra = {"timeout": timeout, "max_retries": 0} if provider in _TIMEOUT_PROVIDERS else {}
    try:
        return init_chat_model(name, model_provider=provider, **extra)
    except ImportError as exc:
        how = f"{install_hint(provider, module)} ({_first_line(exc)})"
        raise ModelConfigError(_not_installed(spec, origin, provider, how)) from None
    except ValueError as exc:
        raise ModelConfigError(f"cannot resolve model {spec!r}: {_first_line(exc)}") from None
    except Exception as exc:  # provider constructors raise their own types (missing keys)
        raise ModelConfigError(
            f"cannot initialise model {spec!r}: {type(exc).__name__}: {_first_line(exc)}"
        ) from None


def _not_installed(spec: str, origin: str, provider: str, how: str) -> str:
    """One line: which model, where its name came from, and how to install its provider."""
    where = f" ({origin})" if origin else ""
    return f"provider {provider!r} is not installed for model {spec!r}{where}: {how}"


def context_window(model: object) -> int | None:
    """`max_input_tokens` of the model's LangChain profile, when it has one."""
    profile = getattr(model, "profile", None) or {}
    value = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
