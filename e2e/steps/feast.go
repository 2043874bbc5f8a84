package steps

// FeastClient is what a data scientist's code does with a feature store's
// client configuration: it reads the feature_store.yaml at
// $FEAST_FS_YAML_FILE_PATH (where the platform mounts a bound store's)
// with PyYAML and connects with it alone, to the offline store with
// psycopg2 and to the online store with redis-py (Debian's packages in the
// jupyter and pytorch images). It writes and reads back a key of the
// store's project (the value of $WHO) and prints
// "BOUND db=DATABASE redis=VALUE". A refused connection is tried again for
// up to 90 s: the cluster's NetworkPolicy engine admits a new pod to a
// managed server a moment after the pod started.
const FeastClient = `
import os, sys, time, yaml, psycopg2, redis
def retried(call, refused):
    for attempt in range(90):
        try:
            return call()
        except refused as e:
            if "refused" not in str(e).lower() or attempt == 89:
                raise
            print("connection refused, trying again", file=sys.stderr, flush=True)
            time.sleep(1)
with open(os.environ["FEAST_FS_YAML_FILE_PATH"]) as f:
    c = yaml.safe_load(f)
o = c["offline_store"]
conn = retried(lambda: psycopg2.connect(host=o["host"], port=o["port"], dbname=o["database"], user=o["user"],
                        password=o["password"], sslmode=o.get("sslmode") or "disable", connect_timeout=20), psycopg2.OperationalError)
cur = conn.cursor()
cur.execute("SELECT current_database()")
db = cur.fetchone()[0]
parts = c["online_store"]["connection_string"].split(",")
host, port = parts[0].rsplit(":", 1)
opts = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
r = redis.Redis(host=host, port=int(port), username=opts.get("username"), password=opts.get("password"),
                ssl=opts.get("ssl", "false").lower() == "true", socket_timeout=20)
key = "e2e_key_" + c["project"]
retried(lambda: r.hset(key, "bound", os.environ["WHO"]), redis.exceptions.ConnectionError)
# HMGET, as Feast reads: the store's ACL user may run what Feast runs.
print("BOUND db=%s redis=%s" % (db, r.hmget(key, ["bound"])[0].decode()), flush=True)
`
