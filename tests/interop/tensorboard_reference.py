"""The Python side of tests/interop/test_tensorboard_reader.cpp: tensorboard's own EventAccumulator loads the
event file in RUN_DIR and prints every scalar tag as JSON {tag: [[step, value], ...]}."""
import json
import sys

from tensorboard.backend.event_processing import event_accumulator

accumulator = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={event_accumulator.SCALARS: 0})
accumulator.Reload()
print(json.dumps({tag: [[e.step, e.value] for e in accumulator.Scalars(tag)]
                  for tag in accumulator.Tags()["scalars"]}))
