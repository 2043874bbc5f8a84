"""Report training progress to the TrainingJob operator.

    from mlplatform import progress
    progress.report(step=120, total=1000, epoch=2, metrics={"loss": 0.41})
    ...
    progress.report(step=1000, total=1000)   # the final report
    progress.flush()                         # also runs at exit

report() never blocks and never raises: a background thread sends the
newest report over HTTPS (the contract is in the trainingjob-operator
chart's README), at most one per `min_interval` seconds, waits as long as
a 429 or 503 answer's Retry-After says, retries the newest report when the
endpoint cannot be reached (backing off up to 30 seconds), and drops older
reports that were not sent yet. Failures are printed once to stderr;
training goes on.

The operator gives every training pod MLPLATFORM_PROGRESS_URL,
MLPLATFORM_PROGRESS_TOKEN_FILE and MLPLATFORM_PROGRESS_CA. Without them,
or in any process but rank 0 (see rank()), report() does nothing: the
operator accepts reports from rank 0 only, so the other ranks never send
one. Standard library only.
"""

import atexit
import json
import math
import os
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request

__all__ = ["report", "flush", "rank", "is_rank_zero", "Reporter"]

_MAX_RETRY_AFTER = 300.0
_MAX_RETRY_DELAY = 30.0
# Doublings of the retry delay before it stays at its cap: 2**31 times any
# sensible min_interval is past _MAX_RETRY_DELAY.
_MAX_BACKOFF_STEPS = 32


class Reporter:
    """Sends the newest report in the background; see the module doc."""

    def __init__(self, url, token_file, ca_pem, min_interval=1.0, timeout=10.0, clock=time.monotonic):
        self._url = url
        self._token_file = token_file
        context = ssl.create_default_context(cadata=ca_pem) if ca_pem else ssl.create_default_context()
        # No redirects: whatever answered at the progress URL with one would
        # have the pod's token sent on to the address it names.
        self._opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), _NoRedirect())
        self._min_interval = min_interval
        self._timeout = timeout
        self._clock = clock
        self._cond = threading.Condition()
        self._pending = None
        self._sending = False
        self._not_before = 0.0
        self._closed = False
        self._warned = set()
        self._failures = 0
        self.sent = 0
        self._thread = threading.Thread(target=self._run, name="mlplatform-progress", daemon=True)
        self._thread.start()

    def report(self, step, total=None, epoch=None, metrics=None):
        try:
            body = _body(step, total, epoch, metrics)
        except (TypeError, ValueError, OverflowError) as e:
            self._warn("invalid", "mlplatform.progress: report ignored: %s" % e)
            return
        with self._cond:
            self._pending = body
            self._cond.notify_all()

    def flush(self, timeout=10.0):
        """Waits until the newest report was sent (or given up); True when nothing is left."""
        deadline = self._clock() + timeout
        with self._cond:
            while self._pending is not None or self._sending:
                left = deadline - self._clock()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
            return True

    def close(self, timeout=10.0):
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self):
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._closed and self._pending is None:
                    return
                wait = self._not_before - self._clock()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                body, self._pending, self._sending = self._pending, None, True
            try:
                delay = self._send(body)
                self._failures = 0
            except Exception as e:  # never let the thread die
                # The endpoint could not be reached (the operator restarting,
                # a NetworkPolicy engine that does not know a new pod yet):
                # the newest report is retried, backing off, never lost.
                # The count stops where the delay reached its cap: a
                # float power of two overflows after about a thousand
                # failures (8.5 hours at the cap), which would end the thread.
                self._failures = min(self._failures + 1, _MAX_BACKOFF_STEPS)
                delay = min(self._min_interval * 2 ** (self._failures - 1), _MAX_RETRY_DELAY)
                with self._cond:
                    if self._pending is None:
                        self._pending = body
                self._warn("error", "mlplatform.progress: report failed, retrying: %s" % e)
            with self._cond:
                self._sending = False
                self._not_before = self._clock() + delay
                self._cond.notify_all()

    def _send(self, body):
        """Posts one report; returns the seconds to wait before the next."""
        with open(self._token_file) as f:
            token = f.read().strip()
        req = urllib.request.Request(self._url, data=body, method="POST", headers={
            "Authorization": "Bearer " + token, "Content-Type": "application/json"})
        try:
            with self._opener.open(req, timeout=self._timeout) as resp:
                resp.read()
                self.sent += 1
                return self._min_interval
        except urllib.error.HTTPError as e:
            message = _message(e)
            if e.code in (429, 503):
                with self._cond:
                    if self._pending is None:
                        # The refused report is still the newest: retry it.
                        self._pending = body
                return max(self._min_interval, _retry_after(e.headers.get("Retry-After")))
            self._warn(e.code, "mlplatform.progress: the operator refused a report (%d): %s" % (e.code, message))
            return self._min_interval

    def _warn(self, key, msg):
        if key not in self._warned:
            self._warned.add(key)
            print(msg, file=sys.stderr, flush=True)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Turns every redirect into an HTTPError, which _send reports as a refusal."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _body(step, total, epoch, metrics):
    report = {"step": _count("step", step)}
    if total is not None:
        report["totalSteps"] = _count("total", total)
    if epoch is not None:
        report["epoch"] = _count("epoch", epoch)
    if metrics:
        values = {}
        for name, value in dict(metrics).items():
            try:
                v = float(value)
            except OverflowError:  # an int beyond a float's range
                continue
            if math.isfinite(v):
                values[str(name)] = v
        if values:
            report["metrics"] = values
    return json.dumps(report).encode()


def _count(name, value):
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError("%s must be a non-negative integer, got %r" % (name, value))
    return int(value)


def _retry_after(value):
    try:
        return min(max(float(value), 0.0), _MAX_RETRY_AFTER)
    except (TypeError, ValueError):
        return 1.0


def _message(err):
    try:
        return json.loads(err.read().decode())["message"]
    except Exception:
        return err.reason


# The variables that carry one process's rank, most specific first: an
# MPI launcher's world rank (Open MPI, PMIx) names the process even in a
# pod whose RANK names the pod; RANK is what PyTorch, XGBoost (both
# backends) and torchrun set; PADDLE_TRAINER_ID is what
# paddle.distributed.launch sets in each trainer; JAX_PROCESS_ID is
# Kubeflow Trainer's JAX runtime's; DMLC_TASK_ID is XGBoost's own
# (Kubeflow Trainer's XGBoost runtime).
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "RANK", "PADDLE_TRAINER_ID", "JAX_PROCESS_ID", "DMLC_TASK_ID")


def rank(environ=None):
    """The rank of this process from the environment its launcher set.

    The first of OMPI_COMM_WORLD_RANK, PMIX_RANK, RANK, PADDLE_TRAINER_ID,
    JAX_PROCESS_ID and DMLC_TASK_ID that is set, else TensorFlow's TF_CONFIG: its chief (or
    master) is rank 0, and without one worker 0 is (as TensorFlow makes it
    the chief); workers come after the chief, in index order, and other
    tasks (ps, evaluator) have no rank. 0 when none is set (a single
    process). None when the process has no rank. Raises ValueError for a
    value that is not a rank.
    """
    env = os.environ if environ is None else environ
    for name in _RANK_VARIABLES:
        value = env.get(name)
        if value is not None and value.strip() != "":
            try:
                r = int(value.strip())
            except ValueError:
                raise ValueError("%s=%r is not a rank" % (name, value)) from None
            if r < 0:
                raise ValueError("%s=%r is not a rank" % (name, value))
            return r
    config = env.get("TF_CONFIG")
    if config:
        return _tf_rank(config)
    return 0


def _tf_rank(config):
    try:
        doc = json.loads(config)
        task = doc.get("task") or {}
        kind, index = str(task.get("type", "")).lower(), int(task.get("index", 0))
        cluster = doc.get("cluster") or {}
    except (ValueError, TypeError, AttributeError) as e:
        raise ValueError("TF_CONFIG is not a TensorFlow cluster configuration: %s" % e) from None
    chiefs = len(cluster.get("chief") or []) + len(cluster.get("master") or [])
    if kind in ("chief", "master"):
        return index
    if kind == "worker":
        return chiefs + index
    return None


def is_rank_zero(environ=None):
    """Whether this process is rank 0, the one whose reports the operator accepts."""
    return rank(environ) == 0


_lock = threading.Lock()
_default = None
_disabled = False


def _reporter():
    global _default, _disabled
    with _lock:
        if _default is None and not _disabled:
            url = os.environ.get("MLPLATFORM_PROGRESS_URL")
            token = os.environ.get("MLPLATFORM_PROGRESS_TOKEN_FILE")
            if not url or not token:
                _disabled = True
                return None
            try:
                if not is_rank_zero():
                    _disabled = True
                    return None
            except ValueError as e:
                print("mlplatform.progress: reporting disabled: %s" % e, file=sys.stderr, flush=True)
                _disabled = True
                return None
            try:
                _default = Reporter(url, token, os.environ.get("MLPLATFORM_PROGRESS_CA"))
                atexit.register(_default.close, 5.0)
            except Exception as e:
                print("mlplatform.progress: reporting disabled: %s" % e, file=sys.stderr, flush=True)
                _disabled = True
        return _default


def report(step, total=None, epoch=None, metrics=None):
    """Queues a report; returns at once. Never raises."""
    try:
        r = _reporter()
        if r is not None:
            r.report(step, total, epoch, metrics)
    except Exception as e:
        print("mlplatform.progress: %s" % e, file=sys.stderr, flush=True)


def flush(timeout=10.0):
    """Waits up to timeout seconds for the newest report to be sent."""
    try:
        r = _reporter()
        return True if r is None else r.flush(timeout)
    except Exception:
        return False
