"""Record and replay: a job with option `record: true` keeps its responses as WARC (record.py); a version then runs
against them in a child process with no network (child.py, serve.py) and its items are compared, field by field, with
the recorded job's (diff.py). No Django here: crawls/replays/runs.py stores recordings and replays."""
