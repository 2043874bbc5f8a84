"""Proves a framework's distributed contract on Kubernetes without the framework.

Usage: python3 contract.py tensorflow|paddle|jax   (Python's standard library only)

Each pod of a TrainingJob runs this program. It reads the framework's
environment exactly as the framework documents it, checks the values
against that documentation, and then proves that every rank reaches every
address and port it was given: each rank listens where the framework would
listen and connects to every other rank, and both ends of each connection
name themselves, so an address that leads to the wrong rank fails too.

TensorFlow (tf.distribute.cluster_resolver.TFConfigClusterResolver, the
TF_CONFIG documentation): TF_CONFIG is JSON with "cluster", a map from job
name (chief, worker, ps) to a list of "host:port", and "task", this task's
"type" (a job of the cluster) and zero-based "index". The chief is the one
task of job "chief", or worker 0 when the cluster has no chief. A task's
server listens on the port of cluster[type][index], on every interface.

Paddle (paddle.distributed.launch, which Kubeflow's PaddleJob expects the
image to run): PADDLE_MASTER (--master, "host:port" of the rendezvous
server), PADDLE_NNODES (--nnodes) and PADDLE_JOB_ID (--job_id). The launcher
on the node whose address is the master's host runs the rendezvous server;
every node registers its trainer endpoint there, and each trainer gets the
collective variables PADDLE_TRAINER_ENDPOINTS (every trainer's "ip:port",
comma-separated, trainer 0 first), PADDLE_CURRENT_ENDPOINT (its own),
PADDLE_TRAINER_ID (its index in that list) and PADDLE_TRAINERS_NUM. This
program plays the launcher's part with one trainer per node: it runs the
rendezvous on the master, derives those variables and checks them.

JAX (jax.distributed.initialize, as Kubeflow Trainer's JAX runtime feeds
it): JAX_COORDINATOR_ADDRESS, which initialize() reads itself, is
"host:port" of process 0, where process 0 starts the coordination service,
bound on every interface at that port ("[::]:port", initialize()'s default
coordinator_bind_address); "localhost" suits one process only, never
several hosts. JAX_NUM_PROCESSES and JAX_PROCESS_ID are what the program
passes as num_processes and process_id: the ids are a dense range 0 to
num_processes-1, one per process. JAX_COORDINATOR_PORT, where set, is the
address's port. Every process, process 0 included, connects to the
coordinator's address and registers its process id there, as the
coordination client does; the coordinator answers when num_processes
processes registered. This program plays the coordinator's part: each
process registers its id with the endpoint it listens on for its peers
(the coordinator's port + 1), checks the ids and reaches every peer.

The program reports its result as the training's progress (one step per
rank proven, with the peers reached as a metric) through the platform's
progress helper when the image has it; the helper sends from rank 0 only,
which it finds in TF_CONFIG, PADDLE_TRAINER_ID (set here as Paddle's
launcher sets it in each trainer) or JAX_PROCESS_ID.

The result (identity, rank, world, the peers reached and the peers that
reached this rank, the variables read and derived) is printed as
"RESULT {json}" and written as the container's termination message. The
exit code is 0 only when every check passed.
"""

import json
import os
import socket
import sys
import threading
import time

try:
    from mlplatform import progress
except ImportError:  # an image without the progress helper
    progress = None

TIMEOUT = float(os.environ.get("CONTRACT_TIMEOUT_SECONDS", "600"))
TERMINATION_LOG = "/dev/termination-log"


class ContractError(Exception):
    pass


def check(ok, msg):
    if not ok:
        raise ContractError(msg)


def log(msg):
    print(msg, flush=True)


def split_address(address):
    """host and port of "host:port", checked."""
    check(isinstance(address, str), "address %r is not a string" % (address,))
    host, sep, port = address.rpartition(":")
    check(sep and host and port.isdigit() and 0 < int(port) < 65536, "address %r is not host:port" % address)
    return host, int(port)


def own_ip():
    """This pod's IP: its hostname resolves to it through /etc/hosts."""
    return socket.gethostbyname(socket.gethostname())


def resolve(host, deadline):
    """IPv4 addresses of host, waiting for its DNS record to appear."""
    while True:
        try:
            return sorted({a[4][0] for a in socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)})
        except socket.gaierror as e:
            check(time.monotonic() < deadline, "%s does not resolve: %s" % (host, e))
            time.sleep(1)


def tensorflow():
    """Reads TF_CONFIG; returns (identity, rank, own port, {identity: address}, facts)."""
    raw = os.environ.get("TF_CONFIG")
    check(raw, "TF_CONFIG is not set")
    cfg = json.loads(raw)
    cluster, task = cfg.get("cluster"), cfg.get("task")
    check(isinstance(cluster, dict) and cluster, "TF_CONFIG has no cluster: %s" % raw)
    check(isinstance(task, dict), "TF_CONFIG has no task: %s" % raw)
    check(set(cluster) <= {"chief", "worker", "ps"}, "cluster jobs %s are not chief, worker, ps" % sorted(cluster))
    check(len(cluster.get("chief", [])) <= 1, "more than one chief: %s" % cluster.get("chief"))
    kind, index = task.get("type"), task.get("index")
    check(kind in cluster, "task type %r is not a job of the cluster %s" % (kind, sorted(cluster)))
    check(isinstance(index, int) and not isinstance(index, bool), "task index %r is not an integer" % (index,))
    check(0 <= index < len(cluster[kind]), "task index %d outside job %s of %d" % (index, kind, len(cluster[kind])))
    peers, order = {}, []
    for job in ("chief", "worker", "ps"):
        for i, address in enumerate(cluster.get(job, [])):
            split_address(address)
            peers["%s:%d" % (job, i)] = address
            order.append("%s:%d" % (job, i))
    check(len(set(peers.values())) == len(peers), "two tasks share an address: %s" % cluster)
    me = "%s:%d" % (kind, index)
    chief = "chief:0" if "chief" in cluster else "worker:0"
    _, port = split_address(peers[me])
    return me, order.index(me), port, peers, {"TF_CONFIG": cfg, "chief": me == chief}


def paddle():
    """Reads Kubeflow's PaddleJob variables, runs the launcher's rendezvous
    and derives the collective variables; same result shape as tensorflow()."""
    master = os.environ.get("PADDLE_MASTER", "")
    nnodes = os.environ.get("PADDLE_NNODES", "")
    job_id = os.environ.get("PADDLE_JOB_ID", "")
    mhost, mport = split_address(master)
    check(nnodes.isdigit() and int(nnodes) >= 1, "PADDLE_NNODES %r is not a positive integer" % nnodes)
    check(job_id, "PADDLE_JOB_ID is empty")
    nnodes, ip = int(nnodes), own_ip()
    is_master = mhost == ip
    endpoint = "%s:%d" % (ip, mport + 1)
    deadline = time.monotonic() + TIMEOUT
    server = None
    if is_master:
        def answer(endpoints):
            return [endpoint] + sorted(e for e in endpoints if e != endpoint)
        server = threading.Thread(target=rendezvous_server, args=(mport, nnodes, answer), daemon=True)
        server.start()
    endpoints = register(master, endpoint, deadline)
    if server:
        server.join()
    check(len(set(endpoints)) == len(endpoints), "two trainers registered the same endpoint: %s" % endpoints)
    check(endpoint in endpoints, "%s is not among the registered endpoints %s" % (endpoint, endpoints))
    trainer_id = endpoints.index(endpoint)
    derived = {
        "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints),
        "PADDLE_CURRENT_ENDPOINT": endpoint,
        "PADDLE_TRAINER_ID": str(trainer_id),
        "PADDLE_TRAINERS_NUM": str(len(endpoints)),
    }
    check(len(endpoints) == nnodes, "%d trainers registered, PADDLE_NNODES is %d" % (len(endpoints), nnodes))
    check((trainer_id == 0) == is_master, "trainer %d, master %s: trainer 0 is the master's node" % (trainer_id, is_master))
    # Paddle's launcher starts each trainer with its id in the environment,
    # where the progress helper finds rank 0.
    os.environ["PADDLE_TRAINER_ID"] = str(trainer_id)
    peers = {"trainer:%d" % i: e for i, e in enumerate(endpoints)}
    facts = {"PADDLE_MASTER": master, "PADDLE_NNODES": str(nnodes), "PADDLE_JOB_ID": job_id,
             "master": is_master, "podIP": ip, "derived": derived}
    return "trainer:%d" % trainer_id, trainer_id, mport + 1, peers, facts


def rendezvous_server(port, nnodes, answer):
    """A rendezvous (Paddle's launcher on the master, JAX's coordinator on
    process 0): collects nnodes registrations and answers every node with
    answer(registrations) as JSON. It listens on every interface."""
    srv = socket.create_server(("", port), reuse_port=False)
    srv.settimeout(TIMEOUT)
    conns, endpoints = [], []
    while len(conns) < nnodes:
        conn, _ = srv.accept()
        conn.settimeout(TIMEOUT)
        line = conn.makefile("r").readline().strip()
        if not line.startswith("REGISTER "):
            conn.close()
            continue
        conns.append(conn)
        endpoints.append(line[len("REGISTER "):])
    reply = (json.dumps(answer(endpoints)) + "\n").encode()
    for conn in conns:
        conn.sendall(reply)
        conn.close()
    srv.close()


def register(master, endpoint, deadline):
    """Registers endpoint (one line) at the rendezvous; returns its answer."""
    host, port = split_address(master)
    while True:
        try:
            with socket.create_connection((host, port), timeout=10) as conn:
                conn.settimeout(max(1.0, deadline - time.monotonic()))
                conn.sendall(("REGISTER %s\n" % endpoint).encode())
                answer = conn.makefile("r").readline()
                check(answer, "the rendezvous at %s closed without an answer" % master)
                return json.loads(answer)
        except OSError as e:
            check(time.monotonic() < deadline, "cannot register at the rendezvous %s: %s" % (master, e))
            time.sleep(1)


def env_count(name, minimum):
    """The integer environment variable name, at least minimum."""
    value = os.environ.get(name, "")
    check(value.isdigit() and int(value) >= minimum, "%s %r is not an integer of at least %d" % (name, value, minimum))
    return int(value)


def jax():
    """Reads JAX's coordinator variables, runs the coordinator on process 0
    and registers every process there; same result shape as tensorflow()."""
    coordinator = os.environ.get("JAX_COORDINATOR_ADDRESS", "")
    check(coordinator, "JAX_COORDINATOR_ADDRESS is not set")
    chost, cport = split_address(coordinator)
    port = os.environ.get("JAX_COORDINATOR_PORT")
    check(port is None or port == str(cport), "JAX_COORDINATOR_PORT %r is not the port of JAX_COORDINATOR_ADDRESS %s" % (port, coordinator))
    num = env_count("JAX_NUM_PROCESSES", 1)
    pid = env_count("JAX_PROCESS_ID", 0)
    check(pid < num, "JAX_PROCESS_ID %d outside 0..%d" % (pid, num - 1))
    ip, deadline = own_ip(), time.monotonic() + TIMEOUT
    # Process 0 runs the coordinator: its address leads to process 0's pod
    # (or, for a single process, to the loopback interface), to no other.
    addresses = resolve(chost, deadline)
    if pid == 0:
        check(ip in addresses or (num == 1 and all(a.startswith("127.") for a in addresses)),
              "JAX_COORDINATOR_ADDRESS %s resolves to %s, not to process 0's pod (%s)" % (coordinator, addresses, ip))
    else:
        check(ip not in addresses, "JAX_COORDINATOR_ADDRESS %s resolves to process %d's own pod (%s), not process 0's" % (coordinator, pid, ip))
    endpoint = "%s:%d" % (ip, cport + 1)
    server = None
    if pid == 0:
        def answer(lines):
            return sorted([int(i), e] for i, e in (line.split(" ", 1) for line in lines))
        server = threading.Thread(target=rendezvous_server, args=(cport, num, answer), daemon=True)
        server.start()
    registered = register(coordinator, "%d %s" % (pid, endpoint), deadline)
    if server:
        server.join()
    ids = [i for i, _ in registered]
    check(ids == list(range(num)), "the coordinator registered process ids %s, want 0..%d once each" % (ids, num - 1))
    check(registered[pid][1] == endpoint, "process %d registered as %s, not %s" % (pid, registered[pid][1], endpoint))
    peers = {"process:%d" % i: e for i, e in registered}
    facts = {"JAX_COORDINATOR_ADDRESS": coordinator, "JAX_COORDINATOR_PORT": port,
             "JAX_NUM_PROCESSES": str(num), "JAX_PROCESS_ID": str(pid),
             "coordinator": pid == 0, "podIP": ip}
    return "process:%d" % pid, pid, cport + 1, peers, facts


class Mesh:
    """Listens on port and connects to every peer; both ends say who they are."""

    def __init__(self, me, port, peers):
        self.me, self.port, self.peers = me, port, peers
        self.others = sorted(p for p in peers if p != me)
        self.reached, self.reached_by, self.errors = set(), set(), []
        self.lock = threading.Lock()
        self.srv = socket.create_server(("", port))
        self.srv.settimeout(1)

    def serve(self, deadline):
        while time.monotonic() < deadline:
            with self.lock:
                if self.reached_by >= set(self.others):
                    return
            try:
                conn, _ = self.srv.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(30)
                try:
                    who = conn.makefile("r").readline().strip()
                    conn.sendall((self.me + "\n").encode())
                except OSError:
                    continue
                with self.lock:
                    if who in self.others:
                        self.reached_by.add(who)
                    else:
                        self.errors.append("a connection named itself %r, not a peer" % who)

    def reach(self, peer, deadline):
        host, port = split_address(self.peers[peer])
        while True:
            try:
                with socket.create_connection((host, port), timeout=10) as conn:
                    conn.settimeout(30)
                    conn.sendall((self.me + "\n").encode())
                    who = conn.makefile("r").readline().strip()
                if who:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                with self.lock:
                    self.errors.append("cannot reach %s at %s" % (peer, self.peers[peer]))
                return
            time.sleep(1)
        with self.lock:
            if who == peer:
                self.reached.add(peer)
            else:
                self.errors.append("%s at %s answered as %s" % (peer, self.peers[peer], who))

    def run(self):
        deadline = time.monotonic() + TIMEOUT
        server = threading.Thread(target=self.serve, args=(deadline,), daemon=True)
        server.start()
        clients = [threading.Thread(target=self.reach, args=(p, deadline), daemon=True) for p in self.others]
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        server.join()
        self.srv.close()
        check(not self.errors, "; ".join(self.errors))
        check(self.reached == set(self.others), "reached %s of %s" % (sorted(self.reached), self.others))
        check(self.reached_by == set(self.others), "reached by %s of %s" % (sorted(self.reached_by), self.others))


def report_progress(world, reached):
    """Reports the proof as the training's progress (from rank 0 only)."""
    if progress is None:
        return
    progress.report(step=world, total=world, metrics={"reached": reached})
    if not progress.flush(15):
        log("progress: the final report was not sent")


def main():
    framework = sys.argv[1] if len(sys.argv) > 1 else ""
    result = {"framework": framework}
    try:
        read = {"tensorflow": tensorflow, "paddle": paddle, "jax": jax}.get(framework)
        check(read, "unknown framework %r" % framework)
        me, rank, port, peers, facts = read()
        result.update(identity=me, rank=rank, world=len(peers), env=facts)
        host, _ = split_address(peers[me])
        ip = own_ip()
        # The rank's own address must lead back to this pod.
        addresses = resolve(host, time.monotonic() + TIMEOUT)
        check(ip in addresses, "own address %s resolves to %s, not this pod's %s" % (peers[me], addresses, ip))
        log("%s rank %d of %d listens on %d; peers %s" % (me, rank, len(peers), port, peers))
        mesh = Mesh(me, port, peers)
        try:
            mesh.run()
        finally:
            result.update(reached=sorted(mesh.reached), reachedBy=sorted(mesh.reached_by))
        result["ok"] = True
        report_progress(len(peers), len(mesh.reached))
    except (ContractError, KeyError, ValueError, OSError) as e:
        result.update(ok=False, error="%s: %s" % (type(e).__name__, e))
    line = json.dumps(result, sort_keys=True)
    log("RESULT " + line)
    # The kubelet creates the file before the container starts; outside
    # Kubernetes there is none, and none is created.
    if os.path.isfile(TERMINATION_LOG):
        with open(TERMINATION_LOG, "w") as f:
            f.write(line)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
