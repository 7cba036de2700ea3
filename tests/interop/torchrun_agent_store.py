# Stands in for torchrun's elastic agent, which Debian's torchrun 1.13 cannot run on Python 3.11 (its Std enum
# parsing fails): host a c10d TCPStore from PyTorch, start two ranks of the given command with the variables
# torchrun sets (TORCHELASTIC_USE_AGENT_STORE included), and exit with the first non-zero rank exit code.
# usage: torchrun_agent_store.py PORT COMMAND...
import datetime
import os
import subprocess
import sys

import torch.distributed as dist

port = int(sys.argv[1])
store = dist.TCPStore("127.0.0.1", port, 3, True, datetime.timedelta(seconds=60), wait_for_workers=False)
ranks = []
for rank in range(2):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="True")
    ranks.append(subprocess.Popen(sys.argv[2:], env=env))
codes = [rank.wait() for rank in ranks]
sys.exit(next((code for code in codes if code != 0), 0))
