"""A small gloo all-reduce job for the hook's real test (run by torchrun through ``-m mlroute.torch``).

Each rank pretends to be its own host (MLROUTE_ADDR = 127.0.0.(10 + rank), set before init, as four hosts would
each find their own address), all-reduces a 4 MiB tensor, tells the recording server it is done (a GET it records
in arrival order), writes its own TCP byte counters (``ss``) and its pid, then keeps all-reducing until the server
has seen ``--renews`` renews. Arguments: OUT_DIR RECORDER_URL --renews N [--hang] [--destroy] (destroy the group
at the end and then tell the server) [--per-host K] (ranks r..r+K-1 share host 127.0.0.(10 + r // K))
[--tcp PORT] (initialise with tcp:// and an explicit rank instead of env://). Files are named by the launcher's
rank; ``rank.R`` holds the rank the process runs as after init (the hook may renumber it: MLROUTE_RING=choose)."""

import json
import os
import subprocess
import sys
import time
import urllib.request

import torch
import torch.distributed as dist

out_dir, url = sys.argv[1], sys.argv[2]
renews = int(sys.argv[sys.argv.index("--renews") + 1])
hang = "--hang" in sys.argv
rank = int(os.environ["RANK"])
per_host = int(sys.argv[sys.argv.index("--per-host") + 1]) if "--per-host" in sys.argv else 1
os.environ["MLROUTE_ADDR"] = f"127.0.0.{10 + rank // per_host}"
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
with open(os.path.join(out_dir, f"pid.{rank}"), "w") as f:
    f.write(str(os.getpid()))

if "--tcp" in sys.argv:
    port = sys.argv[sys.argv.index("--tcp") + 1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=int(os.environ["WORLD_SIZE"]))
else:
    dist.init_process_group("gloo")
with open(os.path.join(out_dir, f"rank.{rank}"), "w") as f:
    json.dump({"rank": dist.get_rank(), "env": os.environ["RANK"]}, f)
x = torch.ones(1 << 20)  # 4 MiB of float32
dist.all_reduce(x)
assert x[0].item() == dist.get_world_size()
opener.open(f"{url}/marker/{rank}", timeout=10).read()

# this rank's TCP connections and the bytes each carried, for the test to see which way the bulk went
ss = subprocess.run(["ss", "-tinpH", "state", "established"], capture_output=True, text=True, timeout=10).stdout
with open(os.path.join(out_dir, f"ss.{rank}"), "w") as f:
    f.write(ss)

for _ in range(3000):  # bounded: until the lease was renewed `renews` times (or forever, with --hang, until killed)
    flag = torch.zeros(1)
    if dist.get_rank() == 0:
        seen = json.load(opener.open(f"{url}/count/POST", timeout=10))["count"]
        flag[0] = float(seen >= renews and not hang)
    dist.all_reduce(flag)
    if flag[0].item() > 0:
        break
    time.sleep(0.05)
if "--destroy" in sys.argv:
    dist.destroy_process_group()
    opener.open(f"{url}/destroyed/{rank}", timeout=10).read()
with open(os.path.join(out_dir, f"done.{rank}"), "w") as f:
    f.write("ok")
