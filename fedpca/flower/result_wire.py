"""The message that hands a run's released result to every site, and the site's answer.

After the last round the coordinator sends every site one QUERY message
(:mod:`fedpca.flower.server.delivery`) whose content is the ConfigRecord ``"result"``
(``run-id``, ``algorithm``, ``contract``; ``columns`` when the run knows them,
``floored-scales`` when it standardised: the columns whose scale sits at the noise floor) and
the
ArrayRecord ``"result-arrays"`` (``basis``, ``d x k``; ``mean`` and ``scale``, ``d`` each, only
when the run centred and scaled: their absence means 0 and 1). A site answers with the
ConfigRecord ``"result"`` holding its name only.

Every field is untrusted (:func:`read_result_message`): the arrays' shapes, types and byte
counts are checked against the site's width ``d`` and its policy's answer limit before numpy
allocates them, then the values (:meth:`fedpca.site.results.ReleasedResult.check`).
Receiving a result costs no budget and changes nothing the site releases; see
:mod:`fedpca.site.results` for what a hostile coordinator can do with it.
"""

from __future__ import annotations

from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedpca.algorithms.site_limits import ENTRY_BYTES, POLICY_KEYS, SiteLimits
from fedpca.errors import FedPCAError
from fedpca.site.results import ReleasedResult, refused_result

#: The message's and the answer's ConfigRecord, and the message's ArrayRecord.
RESULT, RESULT_ARRAYS = "result", "result-arrays"
#: The answer's key for the site's name.
SITE = "site"
#: The ConfigRecord's keys (``columns`` optional).
CONFIG_KEYS = frozenset({"run-id", "algorithm", "contract", "columns", "floored-scales"})
#: The arrays (``mean`` and ``scale`` optional).
ARRAY_KEYS = frozenset({"basis", "mean", "scale"})
#: Bytes a serialised array may hold beyond its entries (numpy's ``.npy`` header).
HEADER_BYTES = 4096


def is_result_message(content: RecordDict) -> bool:
    """Whether a QUERY message carries a released result (rather than the readiness
    question)."""
    return RESULT_ARRAYS in content.array_records


def result_message(result: ReleasedResult) -> RecordDict:
    """The content of the message handing ``result`` to a site."""
    config: dict = {"run-id": result.run_id, "algorithm": result.algorithm,
                    "contract": result.contract}
    if result.columns is not None:
        config["columns"] = list(result.columns)
    if result.floored_scales is not None:
        config["floored-scales"] = list(result.floored_scales)
    arrays = {"basis": result.basis, "mean": result.mean, "scale": result.scale}
    return RecordDict({
        RESULT: ConfigRecord(config),
        RESULT_ARRAYS: ArrayRecord({k: Array(v) for k, v in arrays.items() if v is not None}),
    })


def read_result_message(content: RecordDict, dim: int, limits: SiteLimits,
                        columns: tuple[str, ...] | None = None) -> ReleasedResult:
    """The released result in ``content`` (untrusted), for a site of width ``dim`` (and
    column names ``columns`` when it has a contract) whose policy sets ``limits``; raises
    InvalidRequestError, having allocated nothing for an array of the wrong size, unless
    it is one the site can compute scores with."""
    config, arrays = content.config_records.get(RESULT), content.array_records.get(RESULT_ARRAYS)
    if set(content) != {RESULT, RESULT_ARRAYS} or config is None or arrays is None:
        raise refused_result(f"a result message carries exactly a ConfigRecord {RESULT!r} and an "
                       f"ArrayRecord {RESULT_ARRAYS!r}, got records {sorted(content)}")
    if set(config) - CONFIG_KEYS or set(arrays) - ARRAY_KEYS or "basis" not in arrays:
        raise refused_result(f"unknown or missing keys: config {sorted(config)}, arrays "
                       f"{sorted(arrays)} (expected {sorted(CONFIG_KEYS)} and {sorted(ARRAY_KEYS)}"
                       ", basis required)")
    for name, array in arrays.items():
        _check_size(name, array, dim, limits)
    names = config.get("columns")
    if names is not None and (not isinstance(names, list) or len(names) != dim):
        raise refused_result(f"its columns must be a list of {dim} names")
    floored = config.get("floored-scales")
    if floored is not None and (not isinstance(floored, list) or len(floored) > dim):
        raise refused_result(f"its floored-scales must be a list of at most {dim} column "
                             "indices")
    text = {key: config.get(key, "") for key in ("run-id", "algorithm", "contract")}
    if not all(isinstance(value, str) for value in text.values()):
        raise refused_result("its run-id, algorithm and contract must be text")
    result = ReleasedResult(
        run_id=text["run-id"], algorithm=text["algorithm"], contract=text["contract"],
        basis=arrays["basis"].numpy(),
        mean=arrays["mean"].numpy() if "mean" in arrays else None,
        scale=arrays["scale"].numpy() if "scale" in arrays else None,
        columns=None if names is None else tuple(map(str, names)),
        floored_scales=None if floored is None else tuple(floored),
    )
    result.check(dim, columns)
    return result


def _check_size(name: str, array: Array, dim: int, limits: SiteLimits) -> None:
    """Refuse an array whose declared shape or type is not one a site of width ``dim``
    expects, or whose bytes are more than its shape needs, before it is deserialised."""
    shape = tuple(array.shape)
    expected = (dim,) if name != "basis" else (dim, shape[-1] if len(shape) == 2 else 0)
    if array.dtype != "float64" or shape != expected or not all(n >= 1 for n in shape) or (
        name == "basis" and shape[1] > dim
    ):
        raise refused_result(f"its {name} is {array.dtype} of shape {shape}; this site has {dim} "
                       "columns (basis float64 (d, k) with 1 <= k <= d, mean and scale "
                       "float64 (d,))")
    entries = shape[0] * (shape[1] if len(shape) == 2 else 1)
    megabytes = entries * ENTRY_BYTES / 2**20
    if megabytes > limits.max_answer_mb:
        raise refused_result(f"its {name} of shape {shape} ({megabytes:.4g} MB) is above this "
                             f"site's limit of {limits.max_answer_mb:g} MB (policy "
                             f"limits.{POLICY_KEYS['max_answer_mb']})")
    if len(array.data) > entries * ENTRY_BYTES + HEADER_BYTES:
        raise refused_result(f"its {name} carries {len(array.data)} bytes, more than its shape "
                       "needs")


def result_answer(site: str) -> RecordDict:
    """A site's answer to a result message: its name (nothing else)."""
    return RecordDict({RESULT: ConfigRecord({SITE: site})})


def read_result_answer(content: RecordDict, node: str) -> str:
    """The name of the site that received the result; raises unless the answer is one."""
    answer = content.config_records.get(RESULT)
    if answer is None or not isinstance(answer.get(SITE), str):
        raise FedPCAError(
            f"node {node} answered the result message with records {sorted(content)}, not "
            f"{RESULT!r}; is it running fedpca's ClientApp "
            "(fedpca.flower.site.clientapp.site_client_app)?"
        )
    return str(answer[SITE])
