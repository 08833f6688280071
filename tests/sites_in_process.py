"""Flower's simulation runtime with the virtual sites' ClientApps run in this process
instead of in Ray actors: every test's Flower simulation, unless its file is marked
``pytest.mark.ray`` (``tests/conftest.py``).

Everything of a Flower simulation but Ray stays: ``flwr.simulation.run_simulation``, its
ServerApp thread and in-memory grid and link state, the Simulation Runtime's node registry,
per-node contexts, message queues and error replies, and fedpca's strategies, ClientApp and
site code. Only the backend that hands a message to a ClientApp changes: Flower's
``RayBackend`` ships the ClientApp, the message and the node's context to an actor (Ray
serialises them with cloudpickle, the actor runs the app and sends back the reply and the
context); :class:`InProcessBackend` makes the same round trip through Ray's own cloudpickle
in this process, so a ClientApp never shares an object with the server or with another
message's ClientApp, as with Ray. What it leaves out is Ray itself (its start, ~5-15 s of
CPU on a 2-core machine, and its actors' processes): ``tests/test_flower_simulation.py``
(the README's ``fedpca simulate``), ``tests/test_flower_app.py`` (``flwr run``, SecAgg+)
and ``tests/test_ray_cluster.py`` keep it.

Flower's in-memory runtime also waits between looks (:func:`prompt_waits`): the ServerApp
0.1 s between pulls for replies, the runtime 0.1 s between looks for new messages, its
threads up to 1 s on an empty queue before they see the run stop, and the simulation 3 s for
the ServerApp's context after the run stopped, which a ServerApp that raised never sends
(every refused or failed run's test). With the sites answering
in this process at once, every such wait is idle time (about 60% of these tests' wall time
on 2 cores): within the block each wait is at most :data:`PROMPT_SECONDS`. What a wait
returns, and every message, is unchanged.
"""

import contextlib
import functools
import importlib
import queue
import threading
from collections.abc import Callable, Iterator

from flwr.app import Context, Message
from flwr.clientapp.client_app import ClientApp, ClientAppException, LoadClientAppError
from flwr.server.superlink.fleet import vce
from flwr.server.superlink.fleet.vce import vce_api
from flwr.server.superlink.fleet.vce.backend import Backend, BackendConfig
from flwr.server.superlink.fleet.vce.backend import raybackend
from flwr.superlink.grid import InMemoryGrid
from ray import cloudpickle

#: The module (the package's attribute of that name is its function).
SIMULATION = importlib.import_module("flwr.simulation.run_simulation")
#: The longest wait of Flower's in-memory runtime between two looks, in seconds.
PROMPT_SECONDS = 0.01


def _copied(value):
    """``value`` after the trip Ray makes it take to an actor and back."""
    return cloudpickle.loads(cloudpickle.dumps(value))


class InProcessBackend(Backend):
    """A Simulation Runtime backend with one worker: this process, one message at a time
    (Ray's actors also answer one message each at a time; two sites' messages then run one
    after the other instead of side by side)."""

    def __init__(self, backend_config: BackendConfig) -> None:
        super().__init__(backend_config)
        self.app_fn: Callable[[], ClientApp] | None = None

    def build(self, app_fn: Callable[[], ClientApp]) -> None:
        self.app_fn = app_fn

    @property
    def num_workers(self) -> int:
        return 1

    def is_worker_idle(self) -> bool:
        return True

    def process_message(self, message: Message, context: Context) -> tuple[Message, Context]:
        """Flower's ``ClientAppActor.run`` on copies of the app, message and context."""
        app_fn, message, context = _copied((self.app_fn, message, context))
        try:
            reply = app_fn()(message=message, context=context)
        except LoadClientAppError:
            raise
        except Exception as ex:  # as the actor reports it: the worker makes it an error reply
            raise ClientAppException(str(ex)) from ex
        return _copied((reply, context))

    def terminate(self) -> None:
        self.app_fn = None


def _prompt(timeout: float | None) -> float | None:
    return None if timeout is None else min(timeout, PROMPT_SECONDS)


class PromptQueue(queue.Queue):
    """The runtime's message queues: a ``get`` with a timeout waits at most
    :data:`PROMPT_SECONDS` (its caller loops until the run stops)."""

    def get(self, block=True, timeout=None):
        return super().get(block, _prompt(timeout))


class PromptStop:
    """The run's stop event as the runtime's threads see it: ``wait`` waits at most
    :data:`PROMPT_SECONDS` (its caller loops until the event is set)."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self) -> None:
        self.event.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.event.wait(_prompt(timeout))


def _prompt_start_vce(start_vce: Callable, *args, f_stop: threading.Event, **kwargs):
    return start_vce(*args, f_stop=PromptStop(f_stop), **kwargs)


@contextlib.contextmanager
def patched(module, name: str, value) -> Iterator[None]:
    """``module.name`` is ``value`` within the block."""
    real = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, real)


@contextlib.contextmanager
def prompt_waits() -> Iterator[None]:
    """Within the block, Flower's in-memory runtime waits at most :data:`PROMPT_SECONDS`
    between looks (module docstring)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(patched(vce_api, "Queue", PromptQueue))
        # the ServerApp puts its context before it stops the run, so a context comes at once
        stack.enter_context(patched(SIMULATION, "Queue", PromptQueue))
        stack.enter_context(patched(vce, "start_vce",
                                    functools.partial(_prompt_start_vce, vce.start_vce)))
        stack.enter_context(patched(SIMULATION, "InMemoryGrid", functools.partial(
            InMemoryGrid, pull_interval=PROMPT_SECONDS)))
        yield


@contextlib.contextmanager
def sites_in_process() -> Iterator[None]:
    """Within the block, Flower simulations run their sites with :class:`InProcessBackend`
    (the Simulation Runtime imports ``RayBackend`` from its module when a simulation
    starts), and the runtime's waits are short (:func:`prompt_waits`)."""
    with patched(raybackend, "RayBackend", InProcessBackend), prompt_waits():
        yield
