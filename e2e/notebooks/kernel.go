package notebooks

// kernelClient is a Jupyter client in Python, run in the platform's Jupyter
// image (tornado comes with the server): it starts a kernel through the
// REST API of $NB_URL with $JUPYTER_TOKEN, sends $CODE over the kernel's
// websocket and prints the kernel's output. A refused first connection is
// tried again: the NetworkPolicy engine admits a new pod a moment after it
// starts. It exits 0 when the cell ran
// without error. With HOLD=1 it runs a short cell first, then $CODE without
// waiting for it: once the server's REST API (what the operator probes)
// reports the kernel in use (busy, or still starting when the server lost
// track of it) it prints BUSY and keeps the connection open, so
// that the kernel stays busy for as long as the cell runs.
const kernelClient = `
import asyncio, json, os, sys, time, urllib.error, urllib.request, uuid
from tornado import httpclient, websocket

base = os.environ["NB_URL"].rstrip("/") + "/"
headers = {"Authorization": "token " + os.environ["JUPYTER_TOKEN"], "Content-Type": "application/json"}
hold = os.environ.get("HOLD") == "1"

def api(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=60) as res:
        return json.loads(res.read() or b"null")

def start_kernel():
    # The cluster's NetworkPolicy engine lets a new pod through the
    # Notebook's policy only once it has programmed the pod, shortly after
    # it started; until then the connection is refused, so it is tried
    # again for a while. Any other error ends the client at once.
    for attempt in range(90):
        try:
            return api("POST", "api/kernels", {})["id"]
        except urllib.error.URLError as e:
            if not isinstance(e.reason, ConnectionRefusedError) or attempt == 89:
                raise
            print("connection refused, trying again", file=sys.stderr, flush=True)
            time.sleep(1)

async def execute(conn, session, code):
    msg_id = uuid.uuid4().hex
    await conn.write_message(json.dumps({
        "header": {"msg_id": msg_id, "username": "e2e", "session": session,
                   "msg_type": "execute_request", "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
    }))
    return msg_id

async def main():
    kernel = start_kernel()
    session = uuid.uuid4().hex
    url = base.replace("http", "ws", 1) + "api/kernels/%s/channels?session_id=%s" % (kernel, session)
    conn = await websocket.websocket_connect(httpclient.HTTPRequest(url, headers=headers, request_timeout=120))
    # A first short cell, as a user's session starts: the server follows
    # the kernel's state from then on.
    cells = ["pass", os.environ["CODE"]] if hold else [os.environ["CODE"]]
    for i, code in enumerate(cells):
        msg_id = await execute(conn, session, code)
        last = i == len(cells) - 1
        reply, idle = None, False
        while True:
            raw = await conn.read_message()
            if raw is None:
                sys.exit("the server closed the kernel's websocket")
            if not isinstance(raw, str):
                continue
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and last:
                sys.stdout.write(content["text"])
            elif kind == "error":
                print("ERROR %s: %s" % (content["ename"], content["evalue"]))
            elif kind == "status" and hold and last and content["execution_state"] == "busy":
                await until_server_busy(kernel)
            elif kind == "execute_reply":
                reply = content["status"]
            if kind == "status" and content["execution_state"] == "idle":
                idle = True
            # The reply (shell) and the kernel's idle status (iopub, after
            # all output) come in either order: the cell is done with both.
            if reply is not None and idle:
                break
        if reply != "ok":
            sys.exit(1)

# until_server_busy waits until the server's REST API, which the operator
# probes, reports the kernel in use, then keeps the cell running. After a
# first cell ran, "starting" means the server's own connection to the
# kernel missed its messages (seen on a loaded node); the operator counts
# such a kernel as in use too.
async def until_server_busy(kernel):
    for _ in range(120):
        state = api("GET", "api/kernels/" + kernel)["execution_state"]
        if state in ("busy", "starting"):
            print("BUSY " + state, flush=True)
            await asyncio.sleep(24 * 3600)
        await asyncio.sleep(1)
    sys.exit("the server never reported the kernel busy: " + state)

asyncio.run(main())
`
