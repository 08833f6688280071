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
"""

import contextlib
from collections.abc import Callable, Iterator

from flwr.app import Context, Message
from flwr.clientapp.client_app import ClientApp, ClientAppException, LoadClientAppError
from flwr.server.superlink.fleet.vce.backend import Backend, BackendConfig
from flwr.server.superlink.fleet.vce.backend import raybackend
from ray import cloudpickle


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


@contextlib.contextmanager
def sites_in_process() -> Iterator[None]:
    """Within the block, Flower simulations run their sites with :class:`InProcessBackend`
    (the Simulation Runtime imports ``RayBackend`` from its module when a simulation
    starts)."""
    real = raybackend.RayBackend
    raybackend.RayBackend = InProcessBackend
    try:
        yield
    finally:
        raybackend.RayBackend = real
