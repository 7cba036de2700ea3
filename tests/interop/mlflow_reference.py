"""What an MLflow tracking server holds, read with MLflow's own Python client, as JSON on stdout.

    python mlflow_reference.py URI EXPERIMENT

prints {"runs": {RUN_NAME: {"id", "status", "start_time", "end_time", "params", "tags",
"metrics": {KEY: [[step, value], ...]}, "timestamps": {KEY: [ms, ...]}, "artifacts": [...]}}} for every run of the
experiment (each metric's whole history, in step order; its timestamps in the same order).
"""
import json
import math
import sys

from mlflow.tracking import MlflowClient


def main():
    uri, experiment_name = sys.argv[1], sys.argv[2]
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(experiment_name)
    runs = {}
    if experiment is not None:
        for run in client.search_runs([experiment.experiment_id], max_results=1000):
            metrics, timestamps = {}, {}
            for key in run.data.metrics:
                history = sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: (m.step, m.timestamp))
                metrics[key] = [[m.step, None if math.isnan(m.value) else m.value] for m in history]
                timestamps[key] = [m.timestamp for m in history]
            runs[run.info.run_name] = {
                "id": run.info.run_id,
                "status": run.info.status,
                "start_time": run.info.start_time,
                "end_time": run.info.end_time,
                "timestamps": timestamps,
                "params": run.data.params,
                "tags": run.data.tags,
                "metrics": metrics,
                "artifacts": sorted(a.path for a in client.list_artifacts(run.info.run_id)),
            }
    print(json.dumps({"runs": runs}))


if __name__ == "__main__":
    main()
