"""Errors raised by the `orchestrator` package.

::

    OrchestratorError                    base of everything raised here
    ├── OrchestratorUserError (ValueError)
    │   ├── WorkflowError                 malformed workflow YAML, unknown phase or agent
    │   ├── SkillError                    a SKILL.md with invalid front matter
    │   ├── TemplateError                 a template that fails to render or validate
    │   ├── UnknownTaskError (KeyError)   no task with that id in the memory directory
    │   ├── ModelConfigError              a model string that cannot be resolved
    │   ├── ToolConfigError               an unknown, doubly provided or unloadable tool
    │   ├── ApprovalError                 nothing waits for approval, or an unknown request
    │   └── WorkdirError                  a missing or unreadable --workdir
    └── OrchestratorRuntimeError (RuntimeError)
        ├── CheckpointError               a corrupt or unusable checkpoint
        ├── ArtifactError                 a plan, findings or snapshot file that is unusable
        │   └── SnapshotError             a snapshot that is missing or not tether's
        ├── RecoveryError                 nothing valid to resume from
        ├── ModelCallError                a model failed during a run
        │   ├── AgentLoopError            no valid final answer within the step budget
    │   ├── ContextOverflowError      a request over the window even cut to its head
    │   ├── ProviderUnreachableError  no connection to the provider (or no answer in time)
    │   └── ContextLoopError          a context that refills the threshold right after a snapshot
        ├── RemoteAgentError              a remote agent's run failed on its LangGraph Server
        │   └── RemoteUnreachableError    its server stayed unreachable within the timeout
        ├── EventError                    a progress event that does not match its model
        └── Interrupted                   Ctrl-C; the message carries the resume command

    Stopped (KeyboardInterrupt)           Ctrl-C reaching an agent in a worker thread

Messages are one line, show the offending value with `!r` and say what to do next.
"""

from __future__ import annotations

import signal


class OrchestratorError(Exception):
    """Base class of every error raised by the orchestrator package."""


class OrchestratorUserError(OrchestratorError, ValueError):
    """The request is wrong; the message says how to fix it."""


class WorkflowError(OrchestratorUserError):
    """Malformed workflow YAML, unknown phase or agent."""


class SkillError(OrchestratorUserError):
    """A SKILL.md whose front matter is missing or invalid."""


class TemplateError(OrchestratorUserError):
    """A template that fails to render, or output that fails its schema."""


class UnknownTaskError(OrchestratorUserError, KeyError):
    """No task with that id in the memory directory."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ModelConfigError(OrchestratorUserError):
    """A model string that cannot be resolved (unknown or uninstalled provider)."""


class ToolConfigError(OrchestratorUserError):
    """A tool an agent lists that no source provides, a name two sources provide, a Python
    tool that cannot be imported, or an MCP server that cannot be started."""


class ApprovalError(OrchestratorUserError):
    """`approve` of a task that waits for nothing, or of an unknown request id."""


class WorkdirError(OrchestratorUserError):
    """A missing or unreadable working directory."""


class OrchestratorRuntimeError(OrchestratorError, RuntimeError):
    """A failure during a valid run."""


class CheckpointError(OrchestratorRuntimeError):
    """A checkpoint that cannot be parsed or fails its schema."""


class RecoveryError(OrchestratorRuntimeError):
    """Nothing valid to resume from."""


class EventError(OrchestratorRuntimeError):
    """A progress event of an unknown kind, or whose fields do not match its model in
    `orchestrator.events` (a bug in the emitter or the model, not in the user's input)."""


class RemoteAgentError(OrchestratorRuntimeError):
    """A remote agent's run errored on its LangGraph Server, or answered nothing tether can
    read; the message is the server's (its subagent fails, `resume` retries it)."""


class RemoteUnreachableError(RemoteAgentError):
    """A remote agent's server could not be reached (or re-joined) within the model timeout."""


class ModelCallError(OrchestratorRuntimeError):
    """A model call failed during a run."""

    messages: list = []  # noqa: RUF012 - set per instance by the retry middleware
    """The agent's conversation before the failed call (its tool calls answered), when the
    provider failed: a subagent run again continues from it instead of from scratch."""


class ArtifactError(OrchestratorRuntimeError):
    """A plan, findings or snapshot file that is missing, unreadable or not tether's."""


class SnapshotError(ArtifactError):
    """A snapshot file that is missing, unreadable or not a tether snapshot."""


class AgentLoopError(ModelCallError):
    """The agent did not produce a valid final answer within its step budget."""


class ProviderUnreachableError(ModelCallError):
    """The provider could not be reached after every retry (connection refused, DNS,
    timeouts): the task stops resumably and the CLI exits with code 5."""


class ContextOverflowError(ModelCallError):
    """The provider refused a request as too long even after cutting it to its head and the
    newest exchange."""


class ContextLoopError(ModelCallError):
    """A context that reaches the token threshold again right after a snapshot, even
    compacted: another snapshot would not help, so the agent stops with this one line."""


class Interrupted(OrchestratorRuntimeError):
    """The run was stopped by Ctrl-C (or SIGTERM: `signum`); it can be resumed with
    `resume` (a shell command), or (None) it stopped before the task was recorded and there
    is nothing to resume."""

    def __init__(
        self,
        task_id: str,
        checkpoint: str | None,
        memory_dir: str | None,
        resume: str | None,
        signum: int = signal.SIGINT,
    ):
        self.task_id = task_id
        self.checkpoint = checkpoint
        self.memory_dir = memory_dir
        self.signum = signum
        how = "Terminated (SIGTERM)" if signum == signal.SIGTERM else "Interrupted"
        if resume is None:
            super().__init__(
                f"{how} before task {task_id!r} started; nothing was recorded, so there is "
                "nothing to resume: run it again"
            )
        else:
            super().__init__(f"{how}; resume with `{resume}`")


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, `timeout`, `docker stop`, a service manager), raised in the main
    thread where Ctrl-C raises `KeyboardInterrupt`: the run stops the same graceful way."""


class Stopped(KeyboardInterrupt):
    """Ctrl-C, seen by an agent running in a worker thread: it stops before its next model
    call (its finished steps are kept) instead of running to its end. Not an `Exception`,
    so no handler takes it for a failed agent; the run then ends with `Interrupted`."""
